"""Numbers, progress callbacks, the GIL, notebook tables."""
import threading
import time

import pytest

import sanpath


def san():
    return sanpath.random_model(4, 2, 8, skip=False, mlp="none", layernorm="none", d_ff=0, seed=2)


def test_numbers_print_and_convert():
    r = sanpath.forward(san(), sanpath.random_input(6, seed=1), precision=257)
    x = r.layers[1].relative_residual
    assert float(x) == pytest.approx(10 ** x.log10, rel=1e-12)
    assert x.digits is not None and x.digits >= 30
    # str: every confirmed digit, whatever digits= asks: x.digits counts the digits of str(x).
    assert str(x) == x.decimal() and len(x.decimal(5).split("e")[0]) == 6  # d.dddd
    assert len(str(x).split("e")[0].replace(".", "")) == x.digits
    r30 = sanpath.forward(san(), sanpath.random_input(6, seed=1), precision=257, digits=30)
    y = r30.layers[1].relative_residual
    assert str(y) == str(x) and y.digits == x.digits
    # The JSON prints the same strings; the table min(confirmed, digits) with that count in its column.
    layer = r30.to_dict()["layers"][1]
    assert layer["relative_residual"] == str(y) and layer["digits_by_quantity"]["relative_residual"] == y.digits
    row = [l.split() for l in r30.to_table().split("\n") if l.split()[:1] == ["1"]][0]
    assert row[1] == y.decimal(30) and int(row[4]) == min(30, r30.layers[1].digits)
    assert repr(x).startswith("Number('")


def test_below_resolution_is_a_bound():
    # In double the SAN's residual collapses below what double resolves.
    m = sanpath.random_model(5, 2, 8, skip=False, mlp="none", layernorm="none", d_ff=0, seed=2)
    r = sanpath.forward(m, sanpath.random_input(6, seed=1), precision="double")
    bounded = [l.relative_residual for l in r.layers if l.relative_residual.below_resolution]
    assert bounded, r.to_table()
    x = bounded[-1]
    assert str(x).startswith("< 1e-") and x.bound.startswith("1e-") and x.log10 is None
    with pytest.raises(ValueError):
        float(x)


def test_progress_callback_and_its_exception():
    seen = []
    sanpath.forward(san(), sanpath.random_input(6, seed=1), progress=lambda s, d, t: seen.append((s, d, t)))
    assert any(t > 0 and d == t for _, d, t in seen), seen

    def fail(stage, done, total):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        sanpath.forward(san(), sanpath.random_input(6, seed=1), progress=fail)
    # Nothing is left over: the next call runs normally.
    assert sanpath.forward(san(), sanpath.random_input(6, seed=1), precision="double").precision == "double"


def test_gil_is_released():
    m = sanpath.random_model(30, 2, 16, skip=False, mlp="none", layernorm="none", d_ff=0, seed=1)
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.005)

    t = threading.Thread(target=count)
    t.start()
    start = time.time()
    sanpath.forward(m, sanpath.random_input(16, seed=1), precision=4098, confirm=False)
    elapsed = time.time() - start
    done.set()
    t.join()
    assert elapsed > 0.3
    assert len(ticks) > 0.3 * elapsed / 0.005 * 0.2  # the other thread kept running


def test_repr_html_table():
    g = sanpath.path_counts(3, 2, True)
    h = g._repr_html_()
    # C(3,k)·2^k paths of length k, from the library's CSV
    assert h == ("<table><thead><tr><th>length</th><th>count</th></tr></thead><tbody>"
                 "<tr><td>0</td><td>1</td></tr><tr><td>1</td><td>6</td></tr><tr><td>2</td><td>12</td></tr>"
                 "<tr><td>3</td><td>8</td></tr></tbody></table>")
    assert sanpath.collapse(precision=128, confirm=False)._repr_html_().count("<tr>") >= 6


def _in_subprocess(code, isa):
    import os
    import subprocess
    import sys
    env = dict(os.environ, SANPATH_ISA=isa)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_kernels_and_sanpath_isa():
    k = sanpath.kernels()
    assert k["double_products_levels"][0] == "generic"
    assert k["double_products"] in k["double_products_levels"]
    assert k["multiprecision_products"] in ("AVX-512 IFMA kernel", "GMP kernel")
    # The test build compiles every tier of the ladder (scripts/test: SANPATH_TIERS=all),
    # binary precisions digits10_2_2 of 19, 38, ..., 9864 decimal digits (core/scalar.hpp).
    assert k["multiprecision_tiers"] == [65, 128, 257, 513, 1025, 2051, 4098, 8194, 16387, 32772]
    # Every level the CPU runs gives the same double pass, digit for digit.
    code = ("import sanpath; m = sanpath.random_model(3, 2, 8, seed=4); "
            "r = sanpath.forward(m, sanpath.random_input(7, seed=2), precision='double', confirm=False); "
            "print(sanpath.kernels()['double_products']); print(r.to_json())")
    outs = {}
    for level in k["double_products_levels"]:
        r = _in_subprocess(code, level)
        assert r.returncode == 0, r.stderr
        got_level, out = r.stdout.split("\n", 1)
        assert got_level == level
        outs[level] = out
    assert len(set(outs.values())) == 1
    r = _in_subprocess("import sanpath; sanpath.forward(sanpath.random_model(1, 1, 4), sanpath.random_input(3), "
                       "precision='double')", "sse9")
    assert r.returncode != 0
    assert "InputError: SANPATH_ISA=sse9: unknown level (levels: generic, avx2, avx512)" in r.stderr


def test_no_confirm_prints_the_values_computed():
    # A SAN collapsed to double's rounding (layer 2: ~1e-16, noise): without a
    # confirming run the value is printed as computed, marked unconfirmed,
    # never replaced by a bound that was not computed.
    m = sanpath.random_model(4, 2, 8, skip=False, mlp="none", layernorm="none", d_ff=0, seed=2)
    r = sanpath.forward(m, sanpath.random_input(5, seed=2), precision="double", confirm=False)
    for layer in r.layers:
        assert layer.digits is None
    noisy = r.layers[2].relative_residual
    assert not noisy.below_resolution and noisy.digits is None
    assert 0 < float(noisy) < 1e-12
    import json
    assert json.loads(r.to_json())["layers"][2]["relative_residual"] == str(noisy)
