"""Path effectiveness (`sanpath paths --effectiveness`) from Python: the CLI's
JSON byte for byte, the values against the independent mpmath reference
(tests/reference/sanpath_ref.py), and exact path counts."""
import math
import os
import subprocess
import sys

import pytest

import sanpath
from conftest import ROOT, cli_message, cli_ok

ATTENTION = dict(skip="on", mlp="none", layernorm="none")
ATTENTION_ARGS = ["--skip", "on", "--mlp", "none", "--layernorm", "none"]


@pytest.mark.parametrize("checkpoint, ids, kind", [
    ("bert-ticket-classifier", [2, 15, 27, 3, 40], "classifier"),
    ("gpt2-capp", [1, 5, 9, 13, 20, 2], "language model"),
])
def test_effectiveness_matches_cli_and_reference(cli, models, tmp_path, checkpoint, ids, kind):
    path = os.path.join(models, checkpoint)
    model = sanpath.load(path)
    r = sanpath.effectiveness(model, ids, **ATTENTION)
    tokens = ",".join(map(str, ids))
    args = ["paths", "--model", path, "--tokens", tokens, *ATTENTION_ARGS, "--effectiveness"]
    assert r.to_json() == cli_ok(cli, *args, "--format", "json")
    assert r.to_table() == cli_ok(cli, *args)
    assert r.head == kind == r.to_dict()["head"]["kind"] and r.outputs > 1
    L, H = model.layers, model.heads
    assert [e.length for e in r.lengths] == list(range(L + 1))
    # paths of length <= k: sum over j <= k of C(L, j) H^j (a head or the skip connection per layer)
    assert [e.count for e in r.lengths] == [sum(math.comb(L, j) * H ** j for j in range(k + 1)) for k in range(L + 1)]
    # k = L keeps every path: X_{<=L} = X^L, every prediction agrees
    assert r.lengths[-1].agree == r.predictions and r.lengths[-1].distance.below_resolution
    # The values to the digits claimed, against the mpmath reference.
    out = tmp_path / "py.json"
    out.write_text(r.to_json())
    ref = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "reference", "sanpath_ref.py"), "check-paths",
                          "--model", path, "--tokens", tokens, *ATTENTION_ARGS, "--effectiveness", str(out)],
                         capture_output=True, text=True)
    assert ref.returncode == 0, ref.stdout + ref.stderr


def test_without_a_head(models):
    path = os.path.join(models, "bert-ticket-classifier")
    r = sanpath.effectiveness(sanpath.load(path), [2, 15, 27, 3], head=False, **ATTENTION)
    assert r.head is None and all(e.agree is None and e.kl is None for e in r.lengths)
    assert r.head_note == "none applied (the call asked for none)" == r.to_dict()["head_note"]
    # A random model has no task head either: the distance curve only.
    m = sanpath.random_model(3, 2, 8, skip=True, mlp="none", layernorm="none", d_ff=0, seed=1)
    r = sanpath.effectiveness(m, sanpath.random_input(5, seed=1))
    assert r.head is None and r.to_dict()["head"] is None and len(r.lengths) == 4
    assert r.head_note.startswith("none in the file (sanpath reads") and r.head_note == r.to_dict()["head_note"]
    assert r.head_note in r.to_table()


def test_effectiveness_errors_are_the_clis(cli, models):
    path = os.path.join(models, "bert-ticket-classifier")
    msg = cli_message(cli, "paths", "--model", path, "--tokens", "2,15,27,3", "--effectiveness")
    with pytest.raises(sanpath.Error) as e:
        sanpath.effectiveness(sanpath.load(path), [2, 15, 27, 3])  # the model's own variant has an MLP
    assert str(e.value) == msg


@pytest.mark.parametrize("checkpoint, vocab, kind", [
    ("bert-ticket-classifier", 424, "classifier"),
    ("gpt2-capp", 53, "language model"),
])
def test_effectiveness_on_a_batch(cli, models, tmp_path, checkpoint, vocab, kind):
    path = os.path.join(models, checkpoint)
    model = sanpath.load(path)
    sequences = [[(7 * i + 3 * j + 1) % vocab for j in range(3 + i % 5)] for i in range(6)]
    token_file = tmp_path / "tokens.txt"
    token_file.write_text("".join(",".join(map(str, s)) + "\n" for s in sequences))
    r = sanpath.effectiveness(model, sanpath.token_file(str(token_file)), threads=2, **ATTENTION)
    args = ["paths", "--model", path, "--tokens-file", str(token_file), *ATTENTION_ARGS, "--effectiveness"]
    assert r.to_json() == cli_ok(cli, *args, "--format", "json")
    assert r.to_table() == cli_ok(cli, *args)
    # A list of token lists is the same batch (other input descriptions): the same values.
    as_lists = sanpath.effectiveness(model, sequences, **ATTENTION)
    assert [str(e.distance.mean) for e in as_lists.lengths] == \
        [str(e.distance.mean) for e in r.lengths]
    # Each input's values are its own single run's; the pooled counts are counted here.
    singles = [sanpath.effectiveness(model, s, **ATTENTION) for s in sequences]
    predictions = len(sequences) if kind == "classifier" else sum(len(s) for s in sequences)
    for k, e in enumerate(r.lengths):
        assert [str(run.lengths[k].distance) for run in r.runs] == \
            [str(s.lengths[k].distance) for s in singles]
        assert e.head.predictions == predictions
        assert e.head.agree == sum(s.lengths[k].agree for s in singles)
        assert float(str(e.head.kl).lstrip("< ")) >= 0
    assert r.lengths[-1].head.agree == predictions
    # Batches and their errors are the CLI's.
    msg = cli_message(cli, "paths", "--model", path, "--tokens-file", str(token_file), *ATTENTION_ARGS,
                      "--effectiveness", "--threads", "-1")
    with pytest.raises(sanpath.InputError) as err:
        sanpath.effectiveness(model, sequences, threads=-1, **ATTENTION)
    assert str(err.value) == msg
    token_file.write_text("1,2\n3,x\n")
    msg = cli_message(cli, *args)
    with pytest.raises(sanpath.InputError) as err:
        sanpath.effectiveness(model, sanpath.token_file(str(token_file)), **ATTENTION)
    assert str(err.value) == msg
