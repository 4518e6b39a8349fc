"""measures= (the CLI's --measures, docs/math.md §8): the same JSON as the
CLI, byte for byte; every layer's measures as Numbers with their digits; the
companions of a collapsed layer; batch statistics; errors as InputError with
the CLI's message. The values are checked against the mpmath reference in
tests/cli/reference_measures.sh and tests/compute/test_measures.cpp."""
import json
import math

import pytest

import sanpath
from conftest import cli_message, cli_ok


@pytest.fixture(scope="module")
def san(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("measures") / "san.safetensors")
    sanpath.random_model(layers=3, heads=2, d_model=8, skip="off", mlp="none", layernorm="none", seed=4,
                         vocab=16).save(path)
    return path


def test_forward_measures_as_cli(cli, san):
    r = sanpath.forward(sanpath.load(san), sanpath.random_input(6, seed=1), measures="all")
    assert r.to_json() == cli_ok(cli, "forward", "--model", san, "--random-input", "6", "--seed", "1", "--measures",
                                 "all", "--format", "json")
    layers = r.layers
    assert "attention_entropy" not in layers[0].measures
    for layer in layers[1:]:
        m = layer.measures
        assert list(m)[-2:] == ["attention_entropy", "first_token_mass"]
        assert all(isinstance(v, sanpath.Number) and v.digits >= 15 for v in m.values())
        assert math.isclose(float(m["cosine"]) + float(m["one_minus_cosine"]), 1.0, rel_tol=1e-12)


def test_measures_list_forms(san):
    model, x = sanpath.load(san), sanpath.random_input(6, seed=1)
    a = sanpath.forward(model, x, measures=["cosine", "mu"])
    b = sanpath.forward(model, x, measures="mu,cosine")
    assert a.to_json() == b.to_json()
    assert list(a.layers[1].measures) == ["mu", "cosine", "one_minus_cosine"]
    assert sanpath.forward(model, x).layers[1].measures == {}


def test_collapsed_layers_keep_their_digits():
    r = sanpath.collapse(measures="svd_residual,effective_rank")
    san = r.analyses[r.variants.index("SAN")]
    last = san.layers[-1].measures
    for k in ("svd_residual", "effective_rank_minus_one"):
        assert last[k].digits >= 15 and last[k].log10 < -1000, (k, str(last[k]))
    assert str(last["effective_rank"]).startswith("1.000000")


def test_batch_statistics(san):
    r = sanpath.forward(sanpath.load(san), [[1, 2, 3, 4], [5, 6, 7, 8, 9]], measures="mu")
    assert len(r.measures) == 4
    assert all(set(layer) == {"mu"} for layer in r.measures)
    assert r.measures[2]["mu"].mean.digits >= 15 and r.measures[2]["mu"].count == 2
    c = sanpath.collapse(measures="first_token_mass")
    assert c.analyses[0].layers[1].measures["first_token_mass"].digits >= 15


def test_bad_measures_raise_the_cli_message(cli, san):
    with pytest.raises(sanpath.InputError) as e:
        sanpath.forward(sanpath.load(san), [1, 2, 3], measures="mu,rank")
    assert str(e.value) == cli_message(cli, "forward", "--model", san, "--tokens", "1,2,3", "--measures", "mu,rank")


def _relative_residual_mp(X):
    """‖X − 1 mean(X)ᵀ‖_{1,∞} / ‖X‖_{1,∞} of a float64 array, in mpmath at 300 bits (exact data in, exact math)."""
    import mpmath
    mpmath.mp.prec = 300
    rows = [[mpmath.mpf(float(v)) for v in r] for r in X]
    n, d = len(rows), len(rows[0])
    mean = [sum(rows[i][j] for i in range(n)) / n for j in range(d)]
    R = [[rows[i][j] - mean[j] for j in range(d)] for i in range(n)]

    def composite(M):
        one = max(sum(abs(M[i][j]) for i in range(n)) for j in range(d))
        inf = max(sum(abs(v) for v in r) for r in M)
        return mpmath.sqrt(one * inf)

    return composite(R) / composite(rows)


def test_emulation_measured_exactly(cli, san):
    """emulate=: the emulated model's relative residual is that of the emulated X^l (from emulate_trace, the
    values checked bit for bit in test_emulate_reference.py), computed exactly; the same JSON as the CLI."""
    model, x = sanpath.load(san), sanpath.random_input(6, seed=1)
    r = sanpath.forward(model, x, emulate="bf16", measures="mu")
    assert r.to_json() == cli_ok(cli, "forward", "--model", san, "--random-input", "6", "--seed", "1", "--emulate",
                                 "bf16", "--measures", "mu", "--format", "json")
    e = r.emulation
    assert e["format"] == "bf16" and e["overflow"] is None
    trace = sanpath._sanpath.emulate_trace(model, x, "bf16")
    for layer, X in zip(e["layers"], trace["X"]):
        got = layer["relative_residual"]
        want = _relative_residual_mp(X)
        if want == 0:
            assert float(got) == 0
        else:
            assert abs(got.mpf() - want) / want < 10.0 ** (1 - got.digits), (layer["layer"], str(got), want)
        assert isinstance(layer["measures"]["mu"], sanpath.Number)
    assert sanpath.forward(model, x).emulation is None
    with pytest.raises(sanpath.InputError) as err:
        sanpath.forward(model, x, emulate="fp8")
    assert str(err.value) == cli_message(cli, "forward", "--model", san, "--random-input", "6", "--emulate", "fp8")


def test_saturated_attention_never_zero(cli, tmp_path):
    """A GPT-NeoX SAN at weight scale 1 whose attention weights fall below MPFR's widest exponent range at
    layers 11 and 12 (tests/cli/measures.sh): the entropy there is a bound, never 0, as in the CLI."""
    model = str(tmp_path / "saturated")
    cli_ok(cli, "init", "--out", model, "--layout", "gpt_neox", "--layers", "12", "--heads", "2", "--d-model", "16",
           "--d-ff", "32", "--seed", "7", "--dtype", "F32", "--std", "1.0", "--vocab", "64")
    variant = dict(skip="off", mlp="none", layernorm="none")
    r = sanpath.forward(sanpath.load(model), sanpath.tokens([3, 17, 42, 8, 29, 51, 11, 60]),
                        measures="attention_entropy", **variant)
    out = cli_ok(cli, "forward", "--model", model, "--tokens", "3,17,42,8,29,51,11,60", "--skip", "off", "--mlp",
                 "none", "--layernorm", "none", "--measures", "attention_entropy", "--format", "json")
    assert json.loads(r.to_json())["layers"] == json.loads(out)["layers"]  # the CLI streams the layers, load() not
    for layer in r.layers[1:]:
        e = layer.measures["attention_entropy"]
        assert str(e) != "0", layer.layer
        if layer.layer >= 11:
            assert str(e).startswith("< 1e-1388255822130839") and e.digits == 0, (layer.layer, str(e))
        else:
            assert e.digits >= 15, (layer.layer, str(e))
