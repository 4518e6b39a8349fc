"""`sanpath.effectiveness(..., rerun=N)`: the paper's re-run sub-networks
(`sanpath paths --effectiveness --rerun N`) from Python. The CLI's JSON, table
and CSV byte for byte, the values against the independent mpmath reference
(tests/reference/sanpath_ref.py), the accessors against the JSON, path counts
against C(L,k)·H^k, and the result independent of `threads`."""
import math
import os
import subprocess
import sys

import pytest

import sanpath
from conftest import ROOT, cli_message, cli_ok

ATTENTION = dict(skip="on", mlp="none", layernorm="none")
ATTENTION_ARGS = ["--skip", "on", "--mlp", "none", "--layernorm", "none"]
IDS = [2, 15, 27, 3]
# rerun_input_seed (analysis/effectiveness_batch.hpp): input i draws with seed + i·0xD1B54A32D192ED03 mod 2^64.
INPUT_SEED_STEP = 0xD1B54A32D192ED03


@pytest.fixture(scope="module")
def bert(models):
    path = os.path.join(models, "bert-ticket-classifier")
    return path, sanpath.load(path)


def rerun_args(path, *, rerun, repeats, seed, attention=True):
    return ["paths", "--model", path, *(ATTENTION_ARGS if attention else []), "--effectiveness", "--rerun",
            str(rerun), "--repeats", str(repeats), "--seed", str(seed)]


def statistic_strings(s):
    fields = ("mean", "stddev", "min", "median", "max")
    return {f: None if getattr(s, f) is None else str(getattr(s, f)) for f in fields}


def json_statistic(j):
    return {f: j[f] for f in ("mean", "stddev", "min", "median", "max")}


def test_every_path_once_matches_cli_and_reference(cli, bert, tmp_path):
    """N = 16 ≥ every count_k of BERT (1, 8, 16): no draw; the mpmath reference re-runs every sub-network."""
    path, model = bert
    r = sanpath.effectiveness(model, IDS, rerun=16, repeats=2, **ATTENTION)
    assert isinstance(r, sanpath.RerunResult)
    args = [*rerun_args(path, rerun=16, repeats=2, seed=0), "--tokens", ",".join(map(str, IDS))]
    assert r.to_json() == cli_ok(cli, *args, "--format", "json")
    assert r.to_table() == cli_ok(cli, *args)
    assert r.to_csv() == cli_ok(cli, *args, "--format", "csv")
    assert all(e.all_paths and e.evaluated == e.count and e.distance.count == 1 for e in r.lengths)
    out = tmp_path / "py.json"
    out.write_text(r.to_json())
    ref = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "reference", "sanpath_ref.py"), "check-paths",
                          "--model", path, "--tokens", ",".join(map(str, IDS)), *ATTENTION_ARGS, "--effectiveness",
                          "--rerun", "16", "--repeats", "2", str(out)], capture_output=True, text=True)
    assert ref.returncode == 0, ref.stdout + ref.stderr


def test_sampled_paths_match_cli_and_accessors_match_json(cli, bert):
    path, model = bert
    N, R, seed = 3, 3, 7
    r = sanpath.effectiveness(model, IDS, rerun=N, repeats=R, seed=seed, **ATTENTION)
    args = [*rerun_args(path, rerun=N, repeats=R, seed=seed), "--tokens", ",".join(map(str, IDS))]
    assert r.to_json() == cli_ok(cli, *args, "--format", "json")
    assert r.to_table() == cli_ok(cli, *args)
    assert "<table>" in r._repr_html_()
    j = r.to_dict()
    assert (r.samples, r.repeats, r.seed) == (N, R, seed) == (j["rerun"]["samples"], j["rerun"]["repeats"],
                                                            j["rerun"]["seed"])
    assert r.head == "classifier" == j["head"]["kind"] and r.predictions == 1 and r.outputs == 6
    assert str(r.output_frobenius) == j["output_norm"]["frobenius"]
    L, H = model.layers, model.heads
    assert [e.length for e in r.lengths] == list(range(L + 1))
    for k, (e, row) in enumerate(zip(r.lengths, j["effectiveness"])):
        # paths of length exactly k: C(L, k) H^k; N of them run (all when there are no more than N)
        assert e.count == math.comb(L, k) * H ** k == int(row["paths"])
        assert e.evaluated == min(N, e.count) == row["paths_run"]
        assert e.all_paths == (e.count <= N) == row["all_paths"]
        # one value per repetition, a single one when every path ran
        draws = 1 if e.all_paths else R
        assert e.distance.count == draws and len(e.agree) == draws and e.kl.count == draws
        assert statistic_strings(e.distance) == json_statistic(row["rerun"]["distance"])
        assert statistic_strings(e.gap) == json_statistic(row["rerun"]["gap"])
        assert statistic_strings(e.kl) == json_statistic(row["rerun"]["kl"])
        assert e.agree == row["rerun"]["agree"] and e.agree_check == row["rerun"]["agree_check"]
        assert all(0 <= a <= r.predictions for a in e.agree)
        x = r.exact.lengths[k]
        assert (str(x.distance), x.agree, str(x.kl)) == (row["exact"]["distance"], row["exact"]["agree"],
                                                         row["exact"]["kl"])
    # the exact sense inside is the result of rerun=None, and prints as `paths --effectiveness` does
    plain = sanpath.effectiveness(model, IDS, **ATTENTION)
    assert r.exact.to_json() == plain.to_json()
    # at k = 0 the one path (every layer skipped) is X^0 + 1bᵀ in both senses
    assert r.lengths[0].gap.mean.below_resolution


def test_own_variant_has_no_exact_sense(cli, bert):
    """BERT's own variant (post-LayerNorm, MLP): the re-runs only; no exact sense, no gap."""
    path, model = bert
    r = sanpath.effectiveness(model, IDS, rerun=4, repeats=2, seed=1)
    args = [*rerun_args(path, rerun=4, repeats=2, seed=1, attention=False), "--tokens", ",".join(map(str, IDS))]
    assert r.to_json() == cli_ok(cli, *args, "--format", "json")
    assert r.exact is None and r.to_dict()["exact"] is False
    assert all(e.gap is None for e in r.lengths) and r.variant["mlp"] == "residual"


def test_depth_one_rerun_is_the_exact_sense():
    """With one layer a head's attention sees X^0 in the sub-network as in the network: re-running
    every path gives X_{≤k} itself (docs/tour.md, math.md §4), so every gap is below the resolution."""
    m = sanpath.random_model(1, 2, 8, skip=True, mlp="none", layernorm="none", d_ff=0, seed=2, std=0.5)
    r = sanpath.effectiveness(m, sanpath.random_input(5, seed=3), rerun=2, repeats=2)
    assert r.head is None and all(e.agree is None and e.kl is None for e in r.lengths)
    assert all(e.all_paths and e.gap.mean.below_resolution for e in r.lengths)
    assert r.lengths[-1].distance.mean.below_resolution  # X_{≤L} = X^L
    assert not r.lengths[0].distance.mean.below_resolution
    # Two layers: the second layer's attention differs in a sub-network; the gap does not vanish.
    m2 = sanpath.random_model(2, 2, 8, skip=True, mlp="none", layernorm="none", d_ff=0, seed=2, std=0.5)
    r2 = sanpath.effectiveness(m2, sanpath.random_input(5, seed=3), rerun=4, repeats=2)
    assert float(r2.lengths[2].gap.mean) > 1e-3


def test_threads_and_seeds(tmp_path):
    """The same JSON at any thread count (sub-networks of one input, or the inputs of a batch); another seed
    draws other paths."""
    m = sanpath.random_model(3, 2, 8, skip=True, mlp="residual", layernorm="pre", d_ff=16, seed=5, std=0.4)
    x = sanpath.random_input(4, seed=1)
    one = sanpath.effectiveness(m, x, rerun=3, repeats=3, seed=9, threads=1).to_json()
    assert sanpath.effectiveness(m, x, rerun=3, repeats=3, seed=9, threads=3).to_json() == one
    assert sanpath.effectiveness(m, x, rerun=3, repeats=3, seed=10, threads=1).to_json() != one
    b = sanpath.random_batch(4, 3, seed=1)
    batch = sanpath.effectiveness(m, b, rerun=3, repeats=2, seed=9, threads=1).to_json()
    assert sanpath.effectiveness(m, b, rerun=3, repeats=2, seed=9, threads=2).to_json() == batch
    assert sanpath.effectiveness(m, b, rerun=3, repeats=2, seed=9, threads=0).to_json() == batch


def test_batch_matches_cli_and_its_inputs(cli, bert, tmp_path):
    path, model = bert
    sequences = [[2, 15, 27, 3], [2, 320, 364, 391, 3], [2, 19, 87, 384, 3]]
    token_file = tmp_path / "tokens.txt"
    token_file.write_text("".join(",".join(map(str, s)) + "\n" for s in sequences))
    N, R, seed = 3, 2, 1
    r = sanpath.effectiveness(model, sanpath.token_file(str(token_file)), rerun=N, repeats=R, seed=seed, threads=2,
                              **ATTENTION)
    assert isinstance(r, sanpath.RerunBatchResult)
    args = [*rerun_args(path, rerun=N, repeats=R, seed=seed), "--tokens-file", str(token_file), "--threads", "2"]
    assert r.to_json() == cli_ok(cli, *args, "--format", "json")
    assert r.to_table() == cli_ok(cli, *args)
    j = r.to_dict()
    b = len(sequences)
    assert r.seeds == [(seed + i * INPUT_SEED_STEP) % 2 ** 64 for i in range(b)] == j["rerun"]["input_seeds"]
    assert (r.samples, r.repeats, r.seed) == (N, R, seed)
    runs = r.runs
    for i, (s, run) in enumerate(zip(sequences, runs)):
        # input i is the single-input call with its own seed
        single = sanpath.effectiveness(model, s, rerun=N, repeats=R, seed=r.seeds[i], **ATTENTION)
        assert run.to_json() == single.to_json()
    exact = sanpath.effectiveness(model, sequences, **ATTENTION)
    for k, (e, row) in enumerate(zip(r.lengths, j["effectiveness"])):
        assert e.count == int(row["paths"]) and e.evaluated == row["paths_run"] and e.all_paths == row["all_paths"]
        assert e.distance.count == b and e.gap.count == b
        assert statistic_strings(e.distance) == json_statistic(row["rerun"]["distance"])
        assert statistic_strings(e.gap) == json_statistic(row["rerun"]["gap"])
        # predictions pooled over inputs × repetitions (one per input and draw for the classifier)
        draws = [len(run.lengths[k].agree) for run in runs]
        assert e.head.predictions == sum(draws) == (b if e.all_paths else b * R)
        assert e.head.agree == sum(sum(run.lengths[k].agree) for run in runs) == row["rerun"]["head"]["agree"]
        assert str(e.head.kl) == row["rerun"]["head"]["kl"]
        # the exact sense over the batch is that of rerun=None
        assert str(r.exact[k].distance.mean) == str(exact.lengths[k].distance.mean)
        assert r.exact[k].head.agree == exact.lengths[k].head.agree


def test_errors(cli, bert):
    path, model = bert
    tokens = ["--tokens", ",".join(map(str, IDS))]
    # The CLI's option checks, with the parameter named as in Python.
    for kwargs, option in ((dict(rerun=0), ["--rerun", "0"]),
                           (dict(rerun=2, repeats=0), ["--rerun", "2", "--repeats", "0"])):
        msg = cli_message(cli, "paths", "--model", path, *tokens, "--effectiveness", *option)
        with pytest.raises(sanpath.InputError) as e:
            sanpath.effectiveness(model, IDS, **kwargs)
        assert isinstance(e.value, ValueError) and "--" + str(e.value) == msg
    with pytest.raises(ValueError, match=r"^rerun: at least 1 path per length$"):
        sanpath.effectiveness(model, IDS, rerun=-1)
    # The library reads the ints as the CLI reads its words: the CLI's range and message.
    with pytest.raises(ValueError, match=r"^seed: '-1' is not an integer in \[0, 2\^64\)$"):
        sanpath.effectiveness(model, IDS, rerun=2, seed=-1)
    with pytest.raises(ValueError, match=r"^seed: '18446744073709551616' is not an integer in \[0, 2\^64\)$"):
        sanpath.effectiveness(model, IDS, rerun=2, seed=2 ** 64)
    with pytest.raises(ValueError, match=r"^repeats: at least 1 repetition$"):
        sanpath.effectiveness(model, IDS, rerun=2, repeats=-3)
    with pytest.raises(ValueError, match=r"^repeats: only with rerun=N"):
        sanpath.effectiveness(model, IDS, repeats=3, **ATTENTION)
    with pytest.raises(ValueError, match=r"^seed: only with rerun=N"):
        sanpath.effectiveness(model, IDS, seed=1, **ATTENTION)
    with pytest.raises(TypeError):
        sanpath.effectiveness(model, IDS, rerun=2.5)
    # Messages the CLI prints as they are: --threads, and the library's (a token outside the vocabulary).
    msg = cli_message(cli, "paths", "--model", path, *tokens, "--effectiveness", "--rerun", "2", "--threads", "-1")
    with pytest.raises(sanpath.InputError) as e:
        sanpath.effectiveness(model, IDS, rerun=2, threads=-1)
    assert str(e.value) == msg
    msg = cli_message(cli, "paths", "--model", path, "--tokens", "2,9999,3", "--effectiveness", "--rerun", "2")
    with pytest.raises(sanpath.InputError) as e:
        sanpath.effectiveness(model, [2, 9999, 3], rerun=2)
    assert str(e.value) == msg
    with pytest.raises(sanpath.InputError) as e:
        sanpath.effectiveness(model, [[2, 3], [2, 9999, 3]], rerun=2)
    assert "9999" in str(e.value)


def test_without_rerun_nothing_changes(cli, bert):
    path, model = bert
    r = sanpath.effectiveness(model, IDS, rerun=None, **ATTENTION)
    assert type(r) is sanpath.EffectivenessResult
    assert r.to_json() == cli_ok(cli, "paths", "--model", path, "--tokens", ",".join(map(str, IDS)), *ATTENTION_ARGS,
                                 "--effectiveness", "--format", "json")
    assert type(sanpath.effectiveness(model, [IDS, IDS], **ATTENTION)) is sanpath.EffectivenessBatchResult
