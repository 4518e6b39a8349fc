"""Emulated formats (`--emulate fp32|bf16|fp16`, math.md section 9) bit for bit against the independent
numpy reference tests/reference/emulate_ref.py (written from the emulation contract, not from sanpath).

sanpath._sanpath.emulate_trace(model, input, format, skip=, mlp=, layernorm=, record_attention=True)
returns {"X": [X^0..X^L as float64 arrays], "P": per layer, per head, "overflow": str or None,
"overflow_layer": int}. Every X^l and every P entry must have the reference's bits (NaN equal to NaN);
both start from the same double input (an input matrix). Models: a BERT-like post-LN gelu model, a
GPT-2-like pre-LN causal gelu_tanh model, relu with d_qk != d_v and shared layers, a Llama (RMSNorm,
rotary, 4 query heads on 2 kv heads, SwiGLU), a Qwen2 (q/k/v biases), the families' own features
(XLNet's terms, T5's bucket bias, GPT-NeoX's and Phi's parallel blocks with partial rotary and
gelu_fast, Gemma 2's soft cap, window and sandwich norms), variants of them, the real
BERT and GPT-2 checkpoints of ../shared (these fail when the folder is absent), and an fp16 overflow
(layer 2's MLP weights scaled by 300: layer 2 exceeds 65504, the weights do not), where both must name
the same first overflowing layer and operation, and agree on every layer before it.
"""
import os
import sys

import numpy as np
import pytest

import sanpath
from sanpath import _sanpath

from conftest import ROOT

pytest.importorskip("mpmath")          # the reference's model loaders (sanpath_ref.py) import it
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import emulate_ref as E  # noqa: E402
import sanpath_ref as R  # noqa: E402

needs_binding = pytest.mark.skipif(not hasattr(_sanpath, "emulate_trace"),
                                   reason="this build of sanpath has no _sanpath.emulate_trace")

FORMATS = ("fp32", "bf16", "fp16")
SHARED = os.environ.get("SANPATH_SHARED_DIR", os.path.join(ROOT, "..", "shared"))


def _models():
    return {
        "bert": lambda: sanpath.random_model(2, 3, 12, d_ff=24, std=0.3, bias_std=0.05, seed=12),
        "gpt2": lambda: sanpath.random_model(2, 2, 8, d_ff=32, std=0.3, bias_std=0.1, seed=16,
                                             activation="gelu_tanh", layernorm="pre", mask="causal"),
        "relu-shared": lambda: sanpath.random_model(3, 2, 8, d_qk=3, d_v=5, d_ff=12, std=0.4, bias_std=0.1,
                                                    seed=18, activation="relu", skip=False, mlp="plain",
                                                    layernorm="none", shared_layers=True),
        "llama": lambda: sanpath.random_model(2, 4, 16, layout="llama", kv_heads=2, d_ff=24, std=0.3, vocab=20,
                                              seed=17),
        "qwen2": lambda: sanpath.random_model(2, 4, 16, layout="qwen2", kv_heads=2, d_ff=24, std=0.3,
                                              bias_std=0.1, vocab=20, seed=19),
        # docs/math.md section 9 rules 10-13: the families' own features
        "xlnet": lambda: _family("xlnet", clamp_len=3),
        "t5": lambda: _family("t5", d_qk=3, d_v=3, gated=True, rel_buckets=8, rel_max_distance=6),
        "gpt_neox": lambda: _family("gpt_neox", rotary_fraction=0.5),
        "phi": lambda: _family("phi", kv_heads=1, bias_std=0.1, activation="gelu_fast"),
        "gemma2": lambda: _family("gemma2", d_qk=4, d_v=4, sliding_window=2, softcap=5.0, query_pre_attn_scalar=3.0),
    }


def _family(layout, **options):
    """The CLI tests' small checkpoint of a families.md layout (tests/support/family_options.sh)."""
    return sanpath.random_model(2, 2, 8, d_ff=12, std=0.3, seed=5, vocab=20, layout=layout, **options)


FAMILIES = ("xlnet", "t5", "gpt_neox", "phi", "gemma2")
HF = {"llama", "qwen2", *FAMILIES}
# (model, variant overrides): the model's own, and others
CASES = [("bert", {}), ("bert", {"skip": "off", "mlp": "none", "layernorm": "none"}),
         ("bert", {"skip": "off", "mlp": "residual", "layernorm": "post"}),
         ("gpt2", {}), ("gpt2", {"layernorm": "none"}), ("gpt2", {"mlp": "plain", "layernorm": "post"}),
         ("relu-shared", {}), ("llama", {}), ("llama", {"skip": "off", "mlp": "none", "layernorm": "none"}),
         ("qwen2", {})] + [(f, v) for f in FAMILIES for v in ({}, {"skip": "off", "mlp": "none", "layernorm": "none"})]


def _reference_model(model, name, tmp_path):
    """The same weights through the reference's own loaders (native file, or the HF folder)."""
    if name in HF:
        folder = str(tmp_path / name)
        model.save_hf(folder, name, "F64")
        return R.load_model(folder)
    path = str(tmp_path / f"{name}.safetensors")
    model.save(path)
    return R.load_model(path)


def _variant(model, overrides):
    own = dict(model.variant)
    own["skip"] = "on" if own["skip"] in (True, "on") else "off"
    own.update(overrides)
    return own


def _input(d, n=5, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return scale * (rng.normal(size=(n, d)) + rng.normal(size=d))


def _bits_differ(a, b):
    """Indices where a and b (float64) differ in their bits, NaN matching NaN."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return f"shape {a.shape} vs reference {b.shape}"
    same = (a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))
    bad = np.argwhere(~same)
    if len(bad) == 0:
        return None
    i = tuple(bad[0])
    return (f"{len(bad)} of {a.size} entries differ; first at {i}: sanpath {float(a[i])!r} ({float(a[i]).hex()}), "
            f"reference {float(b[i])!r} ({float(b[i]).hex()})")


def _layer_P(res_P, L, l):
    """Layer l's (1..L) attention matrices from the binding's P (indexed by layer 1..L, or 0..L with an
    empty layer 0)."""
    if len(res_P) == L:
        return res_P[l - 1]
    assert len(res_P) == L + 1, f"P has {len(res_P)} entries for {L} layers"
    return res_P[l]


def _compare(res, ref, L, upto=None, what=""):
    """Bitwise agreement of X^0..X^upto (default all) and the P of layers 1..upto."""
    upto = L if upto is None else upto
    X = res["X"]
    assert len(X) == L + 1, f"{what}: {len(X)} matrices X, expected {L + 1}"
    for l in range(upto + 1):
        diff = _bits_differ(X[l], ref["X"][l])
        assert diff is None, f"{what}: X^{l}: {diff}"
    for l in range(1, upto + 1):
        Pl = _layer_P(res["P"], L, l)
        assert len(Pl) == len(ref["P"][l - 1]), f"{what}: layer {l}: {len(Pl)} heads, reference {len(ref['P'][l - 1])}"
        for h, (a, b) in enumerate(zip(Pl, ref["P"][l - 1])):
            diff = _bits_differ(a, b)
            assert diff is None, f"{what}: P of layer {l}, head {h}: {diff}"


def _trace(model, X0, fmt, variant):
    return _sanpath.emulate_trace(model, sanpath.matrix(X0), fmt, skip=variant["skip"], mlp=variant["mlp"],
                                  layernorm=variant["layernorm"], mask=variant["mask"], record_attention=True)


@needs_binding
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name,overrides", CASES, ids=[f"{m}-{'-'.join(v.values()) or 'own'}" for m, v in CASES])
def test_emulated_pass_matches_the_reference_bit_for_bit(tmp_path, name, overrides, fmt):
    model = _models()[name]()
    variant = _variant(model, overrides)
    X0 = _input(model.d_model, seed=len(name) + len(overrides))
    res = _trace(model, X0, fmt, variant)
    ref = E.emulate(_reference_model(model, name, tmp_path), X0, fmt, variant)
    assert ref["overflow"] is None, ref["overflow"]
    assert res["overflow"] is None, res["overflow"]
    _compare(res, ref, model.layers, what=f"{name} {variant} {fmt}")


@needs_binding
def test_fp16_overflow_is_found_at_the_same_layer_and_operation(tmp_path):
    base = _models()["gpt2"]()
    t = {k: (v * 300.0 if k.startswith("layers.1.W_") else v) for k, v in base.native_tensors().items()}
    model = sanpath.from_arrays(t, base.native_config(), "scaled")
    path = str(tmp_path / "scaled.safetensors")
    model.save(path)
    rm = R.load_model(path)
    variant = _variant(model, {})
    X0 = _input(model.d_model, seed=3)
    ref = E.emulate(rm, X0, "fp16", variant)
    assert ref["overflow"] == (2, "MLP"), f"the case no longer overflows where meant: {ref['overflow']}"
    res = _trace(model, X0, "fp16", variant)
    assert res["overflow"] is not None, "sanpath reports no overflow; the reference: layer 2, MLP"
    assert res["overflow_layer"] == 2, (res["overflow_layer"], res["overflow"])
    assert res["overflow"].startswith("layer 2, MLP:") and "65504" in res["overflow"], res["overflow"]
    _compare(res, ref, model.layers, upto=1, what="scaled fp16")
    # past the overflow both go on with the IEEE values: the same infinities (and NaNs) at the same places
    diff = _bits_differ(res["X"][2], ref["X"][2])
    assert diff is None, f"X^2 after the overflow: {diff}"
    # bf16 and fp32 keep binary32's range: no overflow, every bit equal
    for fmt in ("bf16", "fp32"):
        ref = E.emulate(rm, X0, fmt, variant)
        res = _trace(model, X0, fmt, variant)
        assert ref["overflow"] is None and res["overflow"] is None, (fmt, ref["overflow"], res["overflow"])
        _compare(res, ref, model.layers, what=f"scaled {fmt}")


@needs_binding
@pytest.mark.parametrize("fmt", ("bf16", "fp16"))
@pytest.mark.parametrize("folder", ("bert-ticket-classifier", "gpt2-capp"))
def test_real_checkpoints_match_the_reference(folder, fmt):
    path = os.path.join(SHARED, "data", "real-models", folder)
    if not os.path.isdir(path):
        pytest.fail(f"shared data missing: {path} (the real checkpoints are part of the test suite)")
    model = sanpath.load(path)
    rm = R.load_model(path)
    variant = _variant(model, {})
    X0 = _input(model.d_model, n=6, seed=5, scale=0.5)
    res = _trace(model, X0, fmt, variant)
    ref = E.emulate(rm, X0, fmt, variant)
    assert (res["overflow"] is None) == (ref["overflow"] is None), (res["overflow"], ref["overflow"])
    _compare(res, ref, model.layers, what=f"{folder} {fmt}")


def test_reference_self_test():
    """The reference's own rounding and fmaf checks (exact fractions, numpy's conversions)."""
    assert E.self_test() == 0
