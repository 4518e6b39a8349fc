"""Batches of inputs (forward, collapse, report): the CLI's batch JSON byte for
byte, each input's own values equal to a single-input run, the statistics
recomputed in mpmath from those values, results independent of the thread count."""
import os

import numpy as np
import pytest

import sanpath
from conftest import cli_message, cli_ok, write_safetensors

SEQUENCES = [[2, 15, 27, 3], [5, 6, 7], [8, 9, 10, 11, 12]]


@pytest.fixture()
def bert(models):
    path = os.path.join(models, "bert-ticket-classifier")
    return path, sanpath.load(path)


@pytest.fixture()
def token_file(tmp_path):
    path = str(tmp_path / "tokens.txt")
    with open(path, "w") as f:
        f.write("# three sequences of different lengths\n2,15,27,3\n\n5, 6, 7\n8,9,10,11,12\n")
    return path


def test_forward_token_batch_matches_cli(cli, bert, token_file):
    path, model = bert
    expected = cli_ok(cli, "forward", "--model", path, "--tokens-file", token_file, "--format", "json")
    r = sanpath.forward(model, sanpath.token_file(token_file))
    assert isinstance(r, sanpath.ForwardBatchResult)
    assert r.to_json() == expected
    # The same sequences given as a list, the batch named as the file: the same bytes.
    assert sanpath.forward(model, sanpath.batch(SEQUENCES, name=token_file)).to_json() == expected
    assert r.to_table() == cli_ok(cli, "forward", "--model", path, "--tokens-file", token_file)
    assert r.to_csv() == cli_ok(cli, "forward", "--model", path, "--tokens-file", token_file, "--format", "csv")


def test_each_input_is_its_own_run_and_the_statistics_follow(bert):
    mpmath = pytest.importorskip("mpmath")
    _, model = bert
    r = sanpath.forward(model, SEQUENCES)
    assert r.inputs == ["4 token ids", "3 token ids", "5 token ids"]
    for seq, run in zip(SEQUENCES, r.runs):  # every input at its own precision, confirmed by its own run
        assert run.to_json() == sanpath.forward(model, seq).to_json()
    mpmath.mp.dps = 60
    for layer, stat in enumerate(r.layers):
        values = [run.layers[layer].relative_residual for run in r.runs]
        xs = [v.mpf() for v in values]
        mean = sum(xs) / len(xs)
        std = mpmath.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))  # ddof = 1
        assert stat.count == 3
        for got, want in [(stat.mean, mean), (stat.stddev, std), (stat.min, min(xs)), (stat.median, sorted(xs)[1]),
                          (stat.max, max(xs))]:
            assert got.digits is not None and got.digits >= 5, (layer, str(got))
            # agreement to the digits each statistic claims (one unit in the last claimed digit)
            assert abs(got.mpf() - want) <= abs(want) * mpmath.mpf(10) ** (1 - got.digits), (layer, str(got), want)
    assert [[str(x) for x in row] for row in r.relative_residuals()] == [
        [str(run.layers[l].relative_residual) for run in r.runs] for l in range(len(r.layers))]


def test_batch_results_do_not_depend_on_threads(bert):
    _, model = bert
    one = sanpath.collapse(model, SEQUENCES, threads=1).to_json()
    assert sanpath.collapse(model, SEQUENCES, threads=2).to_json() == one
    assert sanpath.collapse(model, SEQUENCES, threads=0).to_json() == one


def test_set_threads_is_the_cli_threads(cli, bert):
    """set_threads is --threads: every call shares that many threads, the
    result does not depend on it, and a bad count is the CLI's error."""
    path, model = bert
    default = sanpath.threads()
    assert default == (os.cpu_count() or 1)
    try:
        outputs = []
        for n in (1, 2, 3):
            sanpath.set_threads(n)
            assert sanpath.threads() == n
            outputs.append(sanpath.forward(model, SEQUENCES[0]).to_json())
        assert outputs[1] == outputs[0] and outputs[2] == outputs[0]
        # The CLI streams one input's layers (the Python model is held whole):
        # the "model" header says so, every number is the same.
        assert outputs[0] == cli_ok(cli, "forward", "--model", path, "--tokens", "2,15,27,3", "--threads", "3",
                                    "--stream-layers", "off", "--format", "json")
        for bad in (-1, 5000):
            msg = cli_message(cli, "forward", "--model", path, "--tokens", "2,15,27,3", "--threads", str(bad))
            with pytest.raises(sanpath.InputError) as e:
                sanpath.set_threads(bad)
            assert str(e.value) == msg
    finally:
        sanpath.set_threads(0)
    assert sanpath.threads() == default


def test_collapse_batch_paper_conventions_matches_cli(cli, bert, token_file):
    path, model = bert
    r = sanpath.collapse(model, sanpath.token_file(token_file), conventions="paper", threads=2)
    assert isinstance(r, sanpath.CollapseBatchResult) and r.conventions == "paper"
    assert r.to_json() == cli_ok(cli, "collapse", "--model", path, "--tokens-file", token_file, "--conventions",
                                 "paper", "--threads", "2", "--format", "json")
    stats = r.statistics()
    assert list(stats) == r.variants and all(len(v) == model.layers + 1 for v in stats.values())
    for i, run in enumerate(r.runs):
        assert run.conventions == "paper"
        assert run.to_json() == sanpath.collapse(model, SEQUENCES[i], conventions="paper").to_json()


def test_array_batches_match_cli_input_file(cli, tmp_path):
    san = sanpath.random_model(3, 2, 8, skip=False, mlp="none", layernorm="none", d_ff=0, seed=4)
    model_path = str(tmp_path / "san.safetensors")
    san.save(model_path)
    X = np.random.default_rng(7).standard_normal((3, 5, 8)) + 1.0
    x_path = str(tmp_path / "X.safetensors")
    write_safetensors(x_path, {"X": X})
    expected = cli_ok(cli, "forward", "--model", model_path, "--input", x_path, "--format", "json")
    model = sanpath.load(model_path)
    from_file = sanpath.input_file(x_path)
    assert isinstance(from_file, sanpath.Batch) and len(from_file) == 3
    assert sanpath.forward(model, from_file).to_json() == expected
    assert sanpath.forward(model, sanpath.batch(X, name=x_path)).to_json() == expected
    # A [n, d] file is one input, as --input.
    write_safetensors(x_path, {"X": X[1]})
    assert isinstance(sanpath.input_file(x_path), sanpath.Input)
    assert sanpath.forward(model, sanpath.input_file(x_path)).to_json() == cli_ok(
        cli, "forward", "--model", model_path, "--input", x_path, "--format", "json")


def test_random_batch_matches_cli(cli, tmp_path):
    model_path = str(tmp_path / "san.safetensors")
    sanpath.random_model(3, 2, 8, skip=False, mlp="none", layernorm="none", d_ff=0, seed=4).save(model_path)
    r = sanpath.forward(sanpath.load(model_path), sanpath.random_batch(6, 4, seed=2), precision="double")
    assert r.to_json() == cli_ok(cli, "forward", "--model", model_path, "--random-input", "6", "--batch", "4",
                                 "--seed", "2", "--precision", "double", "--format", "json")


def test_report_batch_matches_cli(cli, bert, token_file, tmp_path):
    path, model = bert
    out = str(tmp_path / "cli.html")
    cli_ok(cli, "report", "--model", path, "--tokens-file", token_file, "--conventions", "paper", "--out", out)
    with open(out, encoding="utf-8") as f:
        assert sanpath.report(model, sanpath.token_file(token_file), conventions="paper", threads=2) == f.read()


def test_what_is_a_batch():
    m = sanpath.random_model(2, 2, 4, seed=1, vocab=20, max_positions=8)
    assert isinstance(sanpath.batch([[1, 2, 3], [4, 5]]), sanpath.Batch)          # ragged token sequences
    assert len(sanpath.batch(np.array([[1, 2], [3, 4], [5, 6]]))) == 3             # int array [b, n]: token ids
    assert len(sanpath.batch(np.ones((2, 3, 4)))) == 2                              # float array [b, n, d]
    assert isinstance(sanpath.forward(m, [[1, 2, 3], [4, 5]], precision="double"), sanpath.ForwardBatchResult)
    assert isinstance(sanpath.forward(m, np.array([[1, 2], [3, 4]]), precision="double"), sanpath.ForwardBatchResult)
    # nested lists of floats are one matrix X [n, d], as before
    single = sanpath.forward(m, [[0.5, 1.0, 0.0, 2.0], [1.0, 0.0, 0.5, 0.25]], precision="double")
    assert isinstance(single, sanpath.ForwardResult)
    assert sanpath.batch([[1, 2], [3]], name="mine").describe() == "2 inputs from mine, n = 1..2 tokens"


def test_batch_errors_are_the_clis(cli, bert, tmp_path):
    path, model = bert
    bad = str(tmp_path / "bad.txt")
    with open(bad, "w") as f:
        f.write("1,2,3\n4,x,6\n")
    msg = cli_message(cli, "forward", "--model", path, "--tokens-file", bad)
    with pytest.raises(sanpath.InputError) as e:
        sanpath.token_file(bad)
    assert str(e.value) == msg
    # A token id outside the vocabulary: found before any work, naming the input.
    with open(bad, "w") as f:
        f.write("1,2,3\n4,99999,6\n")
    msg = cli_message(cli, "forward", "--model", path, "--tokens-file", bad)
    with pytest.raises(sanpath.InputError) as e:
        sanpath.forward(model, sanpath.token_file(bad))
    assert str(e.value) == msg
    with pytest.raises(sanpath.InputError, match=r"^batch\[1\]: "):
        sanpath.forward(model, [[1, 2, 3], [4, 99999, 6]])
    msg = cli_message(cli, "forward", "--model", path, "--tokens-file", bad, "--threads", "-1")
    with pytest.raises(sanpath.InputError) as e:
        sanpath.forward(model, [[1, 2]], threads=-1)
    assert str(e.value) == msg
    # Commands without batches refuse one.
    with pytest.raises(sanpath.InputError, match="a batch of 2 inputs; this function analyses one input"):
        sanpath.bounds(model, [[1, 2], [3, 4]])


def test_progress_from_worker_threads(bert):
    _, model = bert
    seen = []
    r = sanpath.forward(model, SEQUENCES, precision="double", threads=2,
                        progress=lambda stage, done, total: seen.append(stage))
    assert r.to_json() == sanpath.forward(model, SEQUENCES, precision="double").to_json()
    assert {s.split(":")[0] for s in seen if s.startswith("input ")} == {"input 1/3", "input 2/3", "input 3/3"}, seen

    def fail(stage, done, total):
        raise RuntimeError("stop the batch")

    with pytest.raises(RuntimeError, match="stop the batch"):
        sanpath.forward(model, SEQUENCES, threads=2, progress=fail)
