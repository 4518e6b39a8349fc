"""Every command of the CLI tour (docs/tour.md), run by the CLI and through Python:
the same JSON (and the same table, files and HTML), byte for byte."""
import os

import pytest

import sanpath
from conftest import cli_ok


@pytest.fixture(scope="module")
def san(cli, tmp_path_factory):
    """`sanpath init --out san.safetensors --layers 6 --heads 2 --d-model 16 --skip off --mlp none --layernorm none`,
    by the CLI and by Python: the same bytes."""
    d = tmp_path_factory.mktemp("tour")
    a, b = str(d / "san.safetensors"), str(d / "san-py.safetensors")
    cli_ok(cli, "init", "--out", a, "--layers", "6", "--heads", "2", "--d-model", "16", "--skip", "off", "--mlp",
           "none", "--layernorm", "none")
    sanpath.random_model(layers=6, heads=2, d_model=16, skip="off", mlp="none", layernorm="none").save(b)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read()
    return a


def test_collapse_default(cli):
    r = sanpath.collapse()
    assert r.to_table() == cli_ok(cli, "collapse")
    assert r.to_json() == cli_ok(cli, "collapse", "--format", "json")


def test_forward_gpt2_as_san(cli, models):
    path = os.path.join(models, "gpt2-capp")
    args = ["--model", path, "--tokens", "1,5,9,13,2,7", "--skip", "off", "--mlp", "none", "--layernorm", "none"]
    # The CLI's forward of one input streams the layers by default; so does
    # this model (the same digits as held whole, and the model line says so).
    r = sanpath.forward(sanpath.load(path, stream_layers="on"), [1, 5, 9, 13, 2, 7], skip="off", mlp="none",
                        layernorm="none")
    assert r.to_json() == cli_ok(cli, "forward", *args, "--format", "json")
    assert r.to_table() == cli_ok(cli, "forward", *args)


def test_graph(cli):
    g = sanpath.path_counts(12, 12, True)
    assert g.to_json() == cli_ok(cli, "graph", "--layers", "12", "--heads", "12", "--skip", "on", "--format", "json")
    assert g.total == 23298085122481


def test_paths_sums(cli, san):
    r = sanpath.length_sums(sanpath.load(san), sanpath.random_input(8, seed=1), skip="on")
    assert r.to_json() == cli_ok(cli, "paths", "--model", san, "--random-input", "8", "--seed", "1", "--skip", "on",
                                 "--sums", "--format", "json")


def test_bounds(cli, san):
    r = sanpath.bounds(sanpath.load(san), sanpath.random_input(8, seed=1, residual=0.05))
    assert r.to_json() == cli_ok(cli, "bounds", "--model", san, "--random-input", "8", "--seed", "1",
                                 "--input-residual", "0.05", "--format", "json")
    assert r.verdicts == ["HOLDS"] * 6
    assert not r.verdicts_proven  # confirmed by a second run, not proven


def test_bounds_certified(cli, san):
    """check="certified": the same JSON as `bounds --check certified`, every HOLDS proven (math.md §10)."""
    r = sanpath.bounds(sanpath.load(san), sanpath.random_input(8, seed=1, residual=0.05), check="certified")
    assert r.to_json() == cli_ok(cli, "bounds", "--model", san, "--random-input", "8", "--seed", "1",
                                 "--input-residual", "0.05", "--check", "certified", "--format", "json")
    assert r.verdicts == ["HOLDS"] * 6 and r.verdicts_proven


def test_collapse_bert(cli, models):
    path = os.path.join(models, "bert-ticket-classifier")
    r = sanpath.collapse(sanpath.load(path), [2, 15, 27, 3])
    assert r.to_json() == cli_ok(cli, "collapse", "--model", path, "--tokens", "2,15,27,3", "--format", "json")


def test_report_bert(cli, models, tmp_path):
    path = os.path.join(models, "bert-ticket-classifier")
    out = str(tmp_path / "bert.html")
    cli_ok(cli, "report", "--model", path, "--tokens", "2,15,27,3", "--out", out)
    text = sanpath.report(sanpath.load(path), [2, 15, 27, 3])
    with open(out, encoding="utf-8") as f:
        assert text == f.read()
    mine = str(tmp_path / "py.html")
    assert sanpath.report(sanpath.load(path), [2, 15, 27, 3], out=mine) is None
    with open(mine, encoding="utf-8") as f:
        assert f.read() == text
