"""examples/python/: each script runs, and its numbers are the README's."""
import os
import re
import subprocess
import sys

from conftest import ROOT


def run(script):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", script)], capture_output=True,
                       text=True, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    return r.stdout


def readme_collapse_rows():
    """The layer rows of the first `sanpath collapse` block of README.md."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    block = text.split("$ ./build/sanpath collapse\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if re.match(r"^(layer|[0-9]) ", line)]


def test_collapse_table_reproduces_the_readme():
    out = run("collapse_table.py")
    rows = [line for line in out.splitlines() if re.match(r"^(layer|[0-9]) ", line)]
    assert rows == readme_collapse_rows()
    # The precisions of the README's footer line for the SAN.
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        block = f.read().split("$ ./build/sanpath collapse\n", 1)[1].split("```", 1)[0]
    m = re.search(r"^SAN: .*precision: (\d+) bits.*confirmed by a run at (\d+) bits", block, re.M)
    assert m, block
    assert f"SAN: precision {m.group(1)} bits, checked at {m.group(2)} bits" in out


def test_torch_san_collapses():
    out = run("torch_san.py")
    layers = re.findall(r"^layer (\d+): relative residual ([0-9.]+)e(-?\d+)", out, re.M)
    assert [int(l) for l, _, _ in layers] == list(range(7))
    exponents = [int(e) for _, _, e in layers]
    # Doubly exponential: the exponent roughly triples per layer and leaves float64's range.
    assert exponents[-1] < -308 and exponents[-1] < 2.5 * exponents[-2]
