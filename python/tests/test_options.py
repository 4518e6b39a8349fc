"""method=, check= and conventions=: the CLI's --method, --check and
--conventions (same defaults, same JSON, same error messages)."""
import json
import os

import pytest

import sanpath
from conftest import cli_message, cli_ok


@pytest.fixture()
def bert(models):
    path = os.path.join(models, "bert-ticket-classifier")
    return path, sanpath.load(path)


@pytest.mark.parametrize("kwargs, args", [
    (dict(method="direct"), ["--method", "direct"]),
    (dict(method="centred", precision=257), ["--method", "centred", "--precision", "257"]),
    (dict(precision="double", check="mpfr"), ["--precision", "double", "--check", "mpfr"]),
    (dict(precision="double", check="rounding", center="median"),
     ["--precision", "double", "--check", "rounding", "--center", "median"]),
])
def test_forward_options_match_cli(cli, bert, kwargs, args):
    path, model = bert
    r = sanpath.forward(model, [2, 15, 27, 3], **kwargs)
    # sanpath.load holds the model whole, as --stream-layers off (the CLI's
    # forward of one input streams by default: test_cli_parity).
    assert r.to_json() == cli_ok(cli, "forward", "--model", path, "--tokens", "2,15,27,3", *args, "--format", "json",
                                 "--stream-layers", "off")


def test_check_changes_the_confirming_run(bert):
    _, model = bert
    rounding = sanpath.forward(model, [2, 15, 27, 3], precision="double")  # auto: the rounding check
    mpfr = sanpath.forward(model, [2, 15, 27, 3], precision="double", check="mpfr")
    assert rounding.to_dict()["check_method"] == "rounding" and rounding.check == "double"
    assert mpfr.to_dict()["check_method"] == "mpfr" and mpfr.check == "128 bits"


@pytest.mark.parametrize("conventions", ["theory", "paper"])
def test_collapse_conventions_match_cli(cli, bert, conventions):
    path, model = bert
    r = sanpath.collapse(model, [2, 15, 27, 3], conventions=conventions, method="direct")
    assert r.conventions == conventions
    assert r.to_json() == cli_ok(cli, "collapse", "--model", path, "--tokens", "2,15,27,3", "--conventions",
                                 conventions, "--method", "direct", "--format", "json")


def test_paths_and_bounds_take_method(cli, tmp_path):
    san = str(tmp_path / "san.safetensors")
    sanpath.random_model(4, 2, 8, skip=False, mlp="none", layernorm="none", d_ff=0, seed=3).save(san)
    m = sanpath.load(san)
    inp = sanpath.random_input(6, seed=1)
    common = ["--model", san, "--random-input", "6", "--seed", "1", "--method", "direct", "--format", "json"]
    assert sanpath.length_sums(m, inp, skip="on", method="direct").to_json() == cli_ok(
        cli, "paths", *common, "--skip", "on", "--sums")
    assert sanpath.bounds(m, inp, method="direct").to_json() == cli_ok(cli, "bounds", *common)


@pytest.mark.parametrize("kwargs, args", [
    (dict(method="fast"), ["--method", "fast"]),
    (dict(check="bar"), ["--check", "bar"]),
    (dict(check="rounding", precision=257), ["--check", "rounding", "--precision", "257"]),
    (dict(check="rounding", precision="double", center="optimal"),
     ["--check", "rounding", "--precision", "double", "--center", "optimal"]),
    (dict(precision="quad"), ["--precision", "quad"]),
    (dict(digits=0), ["--digits", "0"]),
    (dict(digits=10 ** 6), ["--digits", "1000000"]),
    (dict(max_bits=20), ["--max-bits", "20"]),
    (dict(max_bits=10 ** 6), ["--max-bits", "1000000"]),
    (dict(center="middle"), ["--center", "middle"]),
])
def test_forward_option_errors_are_the_clis(cli, bert, kwargs, args):
    path, model = bert
    msg = cli_message(cli, "forward", "--model", path, "--tokens", "2,15", *args)
    with pytest.raises(sanpath.InputError) as e:
        sanpath.forward(model, [2, 15], **kwargs)
    assert str(e.value) == msg


def test_collapse_and_report_option_errors_are_the_clis(cli, tmp_path):
    msg = cli_message(cli, "collapse", "--conventions", "figure")
    with pytest.raises(sanpath.InputError) as e:
        sanpath.collapse(conventions="figure")
    assert str(e.value) == msg
    with pytest.raises(sanpath.InputError) as e:
        sanpath.report(conventions="figure")
    assert str(e.value) == msg
    msg = cli_message(cli, "collapse", "--check", "rounding")  # auto precision: the mpfr check only
    with pytest.raises(sanpath.InputError) as e:
        sanpath.collapse(check="rounding")
    assert str(e.value) == msg


def test_centred_balls_cover_llama_as_the_cli(cli, models):
    # The centred balls cover the Llama family's gated MLP (SwiGLU): --method centred --check certified on
    # the trained model runs through them, as the CLI does, every layer's digits proven; auto encloses a
    # gated MLP by the direct balls, and the attention alone by the centred ones.
    path = os.path.join(models, "llama-stories260k")
    model = sanpath.load(path)
    args = ["forward", "--model", path, "--tokens", "1,2,3", "--check", "certified", "--format", "json"]
    j = json.loads(cli_ok(cli, *args, "--method", "centred"))
    mine = json.loads(sanpath.forward(model, [1, 2, 3], method="centred", check="certified").to_json())
    for r in (j, mine):
        del r["model"]["layers_streamed"]  # the CLI streams the layers from the file; load() holds them
    assert mine == j
    assert j["method"] == "centred" and all(layer["digits"] >= 15 for layer in j["layers"])
    assert json.loads(cli_ok(cli, *args))["method"] == "direct"
    assert json.loads(cli_ok(cli, *args, "--skip", "off"))["method"] == "direct"
    assert json.loads(cli_ok(cli, *args, "--mlp", "none"))["method"] == "centred"
