"""Bad inputs raise the right exception with the CLI's one-line message."""
import json
import os

import numpy as np
import pytest

import sanpath
from conftest import read_safetensors, run_cli, write_hf_folder


def cli_message(cli, *args):
    code, out, err = run_cli(cli, *args)
    assert out == ""
    assert err.startswith("sanpath: error: ")
    return code, err[len("sanpath: error: "):].rstrip("\n")


@pytest.fixture()
def bert(models):
    folder = os.path.join(models, "bert-ticket-classifier")
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    return read_safetensors(os.path.join(folder, "model.safetensors")), config


def check_both(cli, tmp_path, state, config, exc):
    folder = str(tmp_path / "m")
    write_hf_folder(folder, state, config)
    code, msg = cli_message(cli, "forward", "--model", folder, "--tokens", "1,2")
    with pytest.raises(exc) as e:
        sanpath.from_arrays(state, config, name="ARR")
    got = str(e.value)
    # The same message, the in-memory source named instead of the files.
    expected = msg.replace(os.path.join(folder, "model.safetensors"), "ARR").replace(
        os.path.join(folder, "config.json"), "ARR config").replace(folder, "ARR")
    assert got == expected
    return code


def test_missing_tensor(cli, tmp_path, bert):
    state, config = bert
    name = next(k for k in state if k.endswith("attention.self.query.weight"))
    del state[name]
    assert check_both(cli, tmp_path, state, config, sanpath.InputError) == 3


def test_wrong_shape(cli, tmp_path, bert):
    state, config = bert
    name = next(k for k in state if k.endswith("intermediate.dense.weight"))
    state[name] = state[name][:, :-1]
    assert check_both(cli, tmp_path, state, config, sanpath.InputError) == 3


def test_unknown_layout(cli, tmp_path, bert):
    state, config = bert
    config["model_type"] = "llamafoo"
    assert check_both(cli, tmp_path, state, config, sanpath.InputError) == 3


def test_nan_weight(cli, tmp_path, bert):
    state, config = bert
    name = next(k for k in state if k.endswith("attention.self.key.weight"))
    state[name] = state[name].copy()
    state[name][0, 1] = np.nan
    assert check_both(cli, tmp_path, state, config, sanpath.InputError) == 3


def test_nan_input_and_bad_input_shape():
    m = sanpath.random_model(2, 2, 4, seed=1)
    X = np.ones((3, 4))
    X[1, 2] = np.nan
    with pytest.raises(sanpath.InputError, match=r"X: NaN at \[1, 2\]"):
        sanpath.forward(m, X)
    with pytest.raises(sanpath.InputError):
        sanpath.forward(m, np.ones((3, 5)))
    with pytest.raises(sanpath.InputError):
        sanpath.forward(m, [1, 2, 3])  # no embeddings for token ids


def test_load_errors_match_cli(cli, tmp_path):
    missing = str(tmp_path / "nope.safetensors")
    code, msg = cli_message(cli, "forward", "--model", missing, "--tokens", "1")
    assert code == 3
    with pytest.raises(sanpath.InputError) as e:
        sanpath.load(missing)
    assert str(e.value) == msg
    assert isinstance(e.value, ValueError) and isinstance(e.value, sanpath.Error)


def test_resource_error():
    m = sanpath.random_model(6, 4, 8, skip=True, mlp="none", layernorm="none", d_ff=0)
    with pytest.raises(sanpath.ResourceError, match="15625"):
        sanpath.enumerate_paths(m, sanpath.random_input(3), limit=100)


def test_float_outside_double_range_raises():
    r = sanpath.collapse(precision=2051, confirm=False)
    tiny = r.analyses[0].layers[5].relative_residual
    assert -499 < tiny.log10 < -497
    with pytest.raises(OverflowError):
        float(tiny)
    mpmath = pytest.importorskip("mpmath")
    assert abs(mpmath.log10(tiny.mpf()) - tiny.log10) < 1e-9
