"""check="certified" (docs/math.md section 10): enclosures of the exact values and the digits they prove.

The enclosures' containment of the exact values is checked against the
independent mpmath reference in tests/cli/certified.sh and
tests/compute/test_enclosure.cpp; here: what Python returns is what the CLI
prints, and the refusals are the CLI's messages as exceptions.
"""
import json
import os

import pytest

import sanpath

from conftest import cli_message, cli_ok


def san():
    return sanpath.random_model(4, 2, 8, skip=False, mlp="none", layernorm="none", d_ff=0, seed=2)


def test_intervals_and_proven_digits(tmp_path):
    r = sanpath.forward(san(), sanpath.random_input(6, seed=1), precision=257, check="certified", digits=30)
    assert r.precision == "257 bits"
    for layer in r.layers:
        x = layer.relative_residual
        lo, hi = x.interval
        if x.below_resolution:
            assert x.digits == 0 and float(hi) < float(x.bound)
            continue
        # the printed value has every proven digit (digits= limits the table only) and lies in its enclosure
        assert len(str(x).split("e")[0].lstrip("-").replace(".", "")) == x.digits
        assert float(lo) <= float(x) <= float(hi)
    assert max(l.relative_residual.digits for l in r.layers) >= 30  # the digits asked are proven where 257 bits resolve them
    # an unproven run has no interval
    assert sanpath.forward(san(), sanpath.random_input(6, seed=1), precision=257).layers[1].relative_residual.interval is None


def test_same_numbers_as_the_cli(cli, tmp_path):
    m = tmp_path / "san.safetensors"
    san().save(str(m))
    out = tmp_path / "c.json"
    cli_ok(cli, "forward", "--model", str(m), "--random-input", "6", "--seed", "1", "--check", "certified",
           "--format", "json", "-o", str(out))
    j = json.loads(out.read_text())
    r = sanpath.forward(sanpath.load(str(m)), sanpath.random_input(6, seed=1), check="certified")
    assert len(j["layers"]) == len(r.layers) == 5
    for rec, layer in zip(j["layers"], r.layers):
        assert rec["relative_residual"] == str(layer.relative_residual)
        assert rec["intervals"]["relative_residual"] == list(layer.relative_residual.interval)
        assert rec["digits_by_quantity"]["relative_residual"] == layer.relative_residual.digits


def test_refusals_are_the_cli_messages(cli, tmp_path):
    m = tmp_path / "san.safetensors"
    san().save(str(m))
    with pytest.raises(ValueError, match="--measures"):
        sanpath.forward(san(), sanpath.random_input(5, seed=1), check="certified", measures="mu")
    msg = cli_message(cli, "forward", "--model", str(m), "--random-input", "5", "--check", "certified",
                      "--measures", "mu")
    assert "--measures" in msg
    with pytest.raises(ValueError) as e:
        sanpath.forward(san(), sanpath.random_input(5, seed=1), check="certified", center="median")
    assert str(e.value) == cli_message(cli, "forward", "--model", str(m), "--random-input", "5", "--check",
                                       "certified", "--center", "median")


def test_double_proven_after_the_fact():
    r = sanpath.forward(san(), sanpath.random_input(6, seed=1), precision="double", check="certified")
    assert r.precision == "double" and r.check.endswith("bits")  # the enclosing run's tier
    for layer in r.layers:
        x = layer.relative_residual
        assert x.interval is not None and 0 <= x.digits <= 17
    assert r.layers[1].relative_residual.digits >= 12  # a double pass keeps most of its digits at layer 1


def test_collapse_certified_is_the_cli_table(cli, tmp_path):
    # The README's Figure-2 table with proven digits (the centred pass in ball arithmetic).
    r = sanpath.collapse(check="certified")
    assert r.variants == ["SAN", "SAN+MLP", "SAN+skip", "full"]
    for name, values in r.relative_residuals().items():
        assert len(values) == 13
        for x in values:
            assert x.interval is not None and x.digits >= 20, (name, str(x), x.digits)
    san = r.relative_residuals()["SAN"]
    assert str(san[12]).endswith("e-1113622")  # far below what the direct pass could enclose
    out = tmp_path / "c.json"
    cli_ok(cli, "collapse", "--check", "certified", "--format", "json", "-o", str(out))
    assert json.loads(out.read_text()) == json.loads(r.to_json())


def test_length_sums_certified_is_the_cli(cli, tmp_path):
    # paths --sums --check certified: the same JSON, with an interval for every length's quantities, for
    # ||X^L||_F and for the decomposition error (exactly 0 by Theorem 2.1: printed as the bound "< 1e-N")
    m = tmp_path / "skip.safetensors"
    sanpath.random_model(3, 2, 8, skip=True, mlp="none", layernorm="none", d_ff=0, seed=3).save(str(m))
    r = sanpath.length_sums(sanpath.load(str(m)), sanpath.random_input(6, seed=1), check="certified")
    assert r.to_json() == cli_ok(cli, "paths", "--model", str(m), "--random-input", "6", "--seed", "1", "--sums",
                                 "--check", "certified", "--format", "json")
    j = r.to_dict()
    assert j["check_method"] == "certified" and j["decomposition_holds"] is True
    assert j["decomposition_error"].startswith("< 1e-")
    lo, hi = j["intervals"]["decomposition_error"]
    assert float(lo) == 0 and float(hi) < float(j["decomposition_error"][2:])
    for row in j["length_sums"]:
        assert set(row["intervals"]) == {"frobenius", "residual", "share"}
        assert row["digits"] >= 20
    with pytest.raises(ValueError) as e:
        sanpath.length_sums(sanpath.load(str(m)), sanpath.random_input(6, seed=1), check="certified",
                            precision="double")
    assert str(e.value) == cli_message(cli, "paths", "--model", str(m), "--random-input", "6", "--seed", "1",
                                       "--sums", "--check", "certified", "--precision", "double")


def test_enumerate_paths_certified_is_the_cli(cli, tmp_path):
    # paths --enumerate --top 3 --check certified: the same JSON, an interval for each path's four norms, the
    # tier that chose the paths; every Number's interval in Python; every path: Theorem 2.1's error enclosed
    m = tmp_path / "skip.safetensors"
    sanpath.random_model(3, 2, 8, skip=True, mlp="none", layernorm="none", d_ff=0, seed=3).save(str(m))
    model, x = sanpath.load(str(m)), sanpath.random_input(6, seed=1)
    r = sanpath.enumerate_paths(model, x, top=3, check="certified")
    assert r.to_json() == cli_ok(cli, "paths", "--model", str(m), "--random-input", "6", "--seed", "1",
                                 "--enumerate", "--top", "3", "--check", "certified", "--format", "json")
    j = r.to_dict()
    assert j["check_method"] == "certified" and j["selected_at_bits"] == r.selected_at_bits
    assert len(j["paths"]) == 3 and set(j["intervals"]) == {"decomposition_error"}
    for row, term in zip(j["paths"], r.paths):
        assert set(row["intervals"]) == {"term_norm_frobenius", "term_norm_composite", "term_residual_composite",
                                         "stochastic_residual_composite"}
        assert row["digits"] >= 20 and term.norm.interval is not None
        lo, hi = term.norm.interval
        assert float(lo) <= float(str(term.norm)) <= float(hi)
    every = sanpath.enumerate_paths(model, x, check="certified")
    assert len(every.paths) == 27 and float(every.decomposition_error.interval[0]) == 0


def test_effectiveness_certified_is_the_cli(cli, models, tmp_path):
    # paths --effectiveness --check certified on the real BERT classifier: the same JSON, an interval for each
    # distance and KL, the agreement proven (agree == agree_most: every argmax decided here), the distance at
    # k = L (0 exactly) the bound its enclosure proves; with rerun the sub-networks run in balls too: the same
    # JSON as the CLI, each repetition's distance with its interval
    bert = os.path.join(models, "bert-ticket-classifier")
    args = dict(skip=True, mlp="none", layernorm="none")
    r = sanpath.effectiveness(sanpath.load(bert), [2, 15, 27, 3, 40], check="certified", **args)
    assert r.to_json() == cli_ok(cli, "paths", "--model", bert, "--tokens", "2,15,27,3,40", "--skip", "on",
                                 "--mlp", "none", "--layernorm", "none", "--effectiveness", "--check",
                                 "certified", "--format", "json")
    assert json.loads(r.to_json())["check_method"] == "certified"
    for e in r.lengths:
        assert e.agree is not None and e.agree == e.agree_most and e.agree_check is None
        for x in (e.distance, e.kl):
            lo, hi = x.interval
            assert float(lo) <= float(hi)
    last = r.lengths[-1].distance
    assert last.below_resolution and float(last.interval[0]) == 0
    assert min(e.digits for e in r.lengths[:-1]) >= 20
    assert sanpath.effectiveness(sanpath.load(bert), [2, 15, 27, 3, 40], **args).lengths[0].agree_most is None
    rr = sanpath.effectiveness(sanpath.load(bert), [2, 15, 27, 3, 40], check="certified", rerun=2, repeats=2,
                               **args)
    assert rr.to_json() == cli_ok(cli, "paths", "--model", bert, "--tokens", "2,15,27,3,40", "--skip", "on",
                                  "--mlp", "none", "--layernorm", "none", "--effectiveness", "--rerun", "2",
                                  "--repeats", "2", "--check", "certified", "--format", "json")
    for e in rr.lengths:
        assert len(e.distance_each) == (1 if e.all_paths else 2) and len(e.agree_most) == len(e.agree)
        for x in e.distance_each:
            lo, hi = x.interval
            assert float(lo) <= float(x) <= float(hi)
    assert sanpath.effectiveness(sanpath.load(bert), [2, 15, 27, 3, 40], rerun=2, **args).lengths[1].agree_most \
        is None


def test_report_certified_is_the_cli(cli, tmp_path):
    # report --check certified: the same HTML, proven digits in the collapse table and, without re-runs, in
    # the effectiveness section, with re-runs too (the sub-networks in balls); another check is refused with
    # the CLI's message
    m = tmp_path / "san.safetensors"
    sanpath.random_model(3, 2, 8, skip=False, mlp="none", layernorm="none", d_ff=0, seed=3).save(str(m))
    out = tmp_path / "cli.html"
    cli_ok(cli, "report", "--model", str(m), "--random-input", "5", "--seed", "1", "--rerun", "0", "--check",
           "certified", "--out", str(out), "-q")
    text = sanpath.report(sanpath.load(str(m)), sanpath.random_input(5, seed=1), name=str(m), rerun=0,
                          check="certified")
    assert text == out.read_text(encoding="utf-8")
    assert "In brackets the digits printed, each proven by enclosures" in text and "not enclosed yet" not in text
    assert "certified: every digit proven by ball arithmetic" in text
    reruns = sanpath.report(sanpath.load(str(m)), sanpath.random_input(5, seed=1), name=str(m), rerun=2,
                            check="certified")
    assert "not enclosed yet" not in reruns and "digits of the mean" not in reruns
    assert "certified: every digit proven by ball arithmetic" in reruns
    with pytest.raises(ValueError) as e:
        sanpath.report(sanpath.load(str(m)), sanpath.random_input(5, seed=1), check="rounding")
    assert str(e.value) == cli_message(cli, "report", "--model", str(m), "--random-input", "5", "--seed", "1",
                                       "--check", "rounding", "--out", str(tmp_path / "no.html"))
    assert str(e.value).startswith("--check: 'rounding' is not a check path analyses can honour")
