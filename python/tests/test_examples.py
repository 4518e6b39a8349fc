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


def test_figure2_batch_is_the_clis_batch(cli):
    """Every mean printed is the CLI's batch statistic, and the log10 columns follow from
    each input's own value in the CLI's JSON (recomputed here in mpmath)."""
    import json
    import statistics

    import mpmath

    from conftest import cli_ok

    out = run("figure2_batch.py")
    j = json.loads(cli_ok(cli, "collapse", "--random-input", "8", "--batch", "4", "--seed", "1", "--conventions",
                          "paper", "--threads", "2", "--format", "json"))
    blocks = out.split("\n\n")[1:]
    assert [b.splitlines()[0] for b in blocks] == [v["name"] for v in j["variants"]]
    mpmath.mp.dps = 30
    for block, variant in zip(blocks, j["variants"]):
        rows = [line.split() for line in block.splitlines()[2:]]
        assert len(rows) == len(variant["layers"]) == 13
        for row, stats in zip(rows, variant["layers"]):
            layer = stats["layer"]
            assert row[0] == str(layer)
            assert row[1] == stats["relative_residual"]["mean"]
            assert row[2] == f"[{stats['relative_residual']['digits']['mean']}]"
            logs = [float(mpmath.log10(mpmath.mpf(run["layers"][layer]["relative_residual"])))
                    for run in variant["inputs"]]
            assert row[3:] == [f"{statistics.mean(logs):.3f}", "±", f"{statistics.stdev(logs):.3f}"]
