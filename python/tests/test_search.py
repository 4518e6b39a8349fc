"""`sanpath bounds --search` from Python: the same search (JSON and saved files
byte for byte), a re-check that `bounds` on the saved files reproduces, the
CLI's error messages."""
import os

import numpy as np
import pytest

import sanpath
from conftest import read_safetensors, run_cli


def test_search_matches_cli(cli, tmp_path):
    a, b = str(tmp_path / "cli.safetensors"), str(tmp_path / "py.safetensors")
    code, out, err = run_cli(cli, "bounds", "--search", "--iterations", "12", "--seed", "3", "--save", a,
                             "--format", "json")
    assert code == 0, err
    r = sanpath.bounds_search(iterations=12, seed=3, save=b)
    assert r.model_path == b and r.input_path == str(tmp_path / "py.input.safetensors")
    assert r.to_json().replace(b, a).replace(r.input_path, str(tmp_path / "cli.input.safetensors")) == out
    for mine, theirs in [(b, a), (r.input_path, str(tmp_path / "cli.input.safetensors"))]:
        with open(mine, "rb") as f, open(theirs, "rb") as g:
            assert f.read() == g.read()
    # The input saved is the X of the result (read by an independent reader), the model the result's model.
    assert np.array_equal(read_safetensors(r.input_path)["X"], r.X)
    assert r.model.layers == 2 and r.model.heads == 1 and r.model.variant["skip"] is False
    # The re-check is `bounds` on the saved files.
    again = sanpath.bounds(sanpath.load(b), sanpath.input_file(r.input_path))
    assert r.recheck.verdicts == again.verdicts
    assert [str(d.upper) for d in r.recheck.measured] == [str(d.upper) for d in again.measured]
    assert r.violated == ("VIOLATED" in r.recheck.verdicts)
    assert r.evaluations == 12 and r.improvements and r.log10_ratio == max(s.log10_ratio for s in r.improvements)


def test_search_is_deterministic_and_saves_later(tmp_path):
    r = sanpath.bounds_search(iterations=6, seed=5, layers=1, heads=2, d_model=4, d_qk=2, tokens=3)
    assert r.model_path == "" and r.to_dict()["saved"] == {"model": "", "input": ""}
    assert sanpath.bounds_search(iterations=6, seed=5, layers=1, heads=2, d_model=4, d_qk=2,
                                 tokens=3).to_json() == r.to_json()
    path = str(tmp_path / "best.safetensors")
    r.save(path)
    assert r.to_dict()["saved"]["model"] == path and os.path.exists(str(tmp_path / "best.input.safetensors"))


@pytest.mark.parametrize("kwargs, args", [
    (dict(layers=0), ["--layers", "0"]),
    (dict(tokens=1), ["--tokens-n", "1"]),
    (dict(theorem="9.9"), ["--theorem", "9.9"]),
    (dict(gamma="-1"), ["--gamma", "-1"]),
])
def test_search_errors_are_the_clis(cli, tmp_path, kwargs, args):
    save = str(tmp_path / "s.safetensors")
    code, out, err = run_cli(cli, "bounds", "--search", "--save", save, *args)
    assert code == 2 and err.startswith("sanpath: error: "), err
    with pytest.raises(sanpath.InputError) as e:
        sanpath.bounds_search(save=save, **kwargs)
    assert str(e.value) == err[len("sanpath: error: "):].rstrip("\n")
    assert not os.path.exists(save)
