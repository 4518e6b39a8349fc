"""The centred pass (math.md §7, §7.1) against values known in closed form."""
import json

import numpy as np
import pytest

import sanpath


def test_centred_pass_keeps_a_tiny_weight_on_a_differing_key():
    """Rows 0 and 1 of X are equal and row 2 differs; with a causal mask and scores −460·x_i·x_j (W_Q = −920,
    scale 1/2), row 2 puts p = e^−30000/(2 + e^−30000) on itself and the rest on keys 0 and 1 alike. The output's
    residual is p·(x_2 − x_0)·(−1/3, −1/3, 2/3)ᵀ, so ‖R‖_{1,∞} = 4p/3 (by hand; mpmath for p). The centred
    pass once summed P_2j·V_j with the heavy keys' terms cancelling and lost p·V_2 at every tier
    (10^−13030 lies below 2^−32772): it must print 4p/3 with its digits."""
    mpmath = pytest.importorskip("mpmath")
    m0 = sanpath.random_model(layers=1, heads=1, d_model=2, d_qk=4, d_v=2, d_ff=0, skip="off", mlp="none",
                              layernorm="none", seed=0)
    t = {k: np.zeros_like(v) for k, v in m0.native_tensors().items()}
    t["layers.0.heads.0.W_Q"][0, 0] = t["layers.0.heads.0.W_Q"][1, 1] = -60000.0
    t["layers.0.heads.0.W_K"][0, 0] = t["layers.0.heads.0.W_K"][1, 1] = 1.0
    t["layers.0.heads.0.W_V"][:] = np.eye(2)
    t["layers.0.heads.0.W_O"][:] = np.eye(2)
    config = json.loads(m0.native_config())
    config["mask"] = "causal"
    m = sanpath.from_arrays(t, config, "equal keys")
    r = sanpath.forward(m, sanpath.matrix(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])), method="centred")
    got = r.layers[1].residual
    mpmath.mp.prec = 300
    p = mpmath.exp(-30000) / (2 + mpmath.exp(-30000))
    assert got.digits >= 20, str(got)
    mantissa, exponent = str(got).split("e")
    value = mpmath.mpf(mantissa[:30] + "e" + exponent)  # the first 29 of its digits
    assert abs(value / (4 * p / 3) - 1) < mpmath.mpf(10) ** -19, (value, mpmath.nstr(4 * p / 3, 25))
