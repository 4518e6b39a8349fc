"""Python under mpi4py: `mpirun -np 2 python3 script.py` shares a batch over
the two ranks (distribution_notes() says so), and rank 0 gets exactly what
one process computes (the same JSON, byte for byte), for batches and for the
path shards of one input (enumeration, top-K, sampling); an error of an input that rank 1 computes (160 tokens,
over the memory budget that the two short inputs fit) raises the same exception with the same message on every rank."""
import os
import shutil
import subprocess
import sys

import pytest

import sanpath

SCRIPT = r"""
import sys
from mpi4py import MPI   # initialises MPI: sanpath's batches then share their inputs over the ranks
import sanpath

model = sanpath.load(sys.argv[1])
seqs = [[2, 15, 27, 3], [5, 6, 7], [8, 9, 10, 11, 12], [2, 40, 41, 3], [2, 100, 200, 300, 3]]
out = sys.argv[2]
if out == "error":
    sanpath.set_memory_budget("8MiB")
    try:
        sanpath.forward(model, [[2, 3], list(range(1, 161)), [4, 5]])
    except sanpath.ResourceError as e:
        # A file per rank, not stdout: mpirun may drop a rank's last output when the job ends at once.
        rank = MPI.COMM_WORLD.Get_rank()
        with open(f"{sys.argv[3]}/rank{rank}.txt", "w") as f:
            f.write(f"rank {rank}: ResourceError: {e}")
    sys.exit(0)
if out.endswith("paths.json"):  # the path shards of one input
    san = sanpath.random_model(5, 3, 12, std=0.4, seed=4)
    x = sanpath.random_input(6, seed=1)
    parts = [sanpath.enumerate_paths(san, x, skip="on", mlp="none", layernorm="none").to_json(),
             sanpath.enumerate_paths(san, x, skip="on", mlp="none", layernorm="none", top=7).to_json(),
             sanpath.sample_paths(san, x, 300, lengths=[3], seed=5, skip="on", mlp="none", layernorm="none").to_json()]
else:
    parts = [sanpath.collapse(model, seqs, conventions="paper").to_json(),
             sanpath.forward(model, seqs, skip="off", mlp="none", layernorm="none").to_json()]
if MPI.COMM_WORLD.Get_rank() == 0:
    with open(out, "w") as f:
        f.write("".join(parts))
    with open(out + ".notes", "w") as f:
        f.write("\n".join(sanpath.distribution_notes()))
"""


@pytest.fixture()
def mpirun():
    path = shutil.which("mpirun")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("mpirun missing (scripts/install-deps installs openmpi-bin)")
        pytest.skip("mpirun missing")
    pytest.importorskip("mpi4py")
    return path


def run_two_ranks(mpirun, tmp_path, *args):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([mpirun, "-np", "2", "--oversubscribe", sys.executable, str(script), *args],
                          capture_output=True, text=True, env=env, timeout=600)


def test_two_ranks_give_rank_0_what_one_process_computes(mpirun, models, tmp_path):
    assert sanpath.kernels().get("mpi", "").startswith("Open MPI"), sanpath.kernels()
    path = os.path.join(models, "bert-ticket-classifier")
    out = tmp_path / "two.json"
    r = run_two_ranks(mpirun, tmp_path, path, str(out))
    assert r.returncode == 0, r.stderr
    model = sanpath.load(path)
    seqs = [[2, 15, 27, 3], [5, 6, 7], [8, 9, 10, 11, 12], [2, 40, 41, 3], [2, 100, 200, 300, 3]]
    one = sanpath.collapse(model, seqs, conventions="paper").to_json() + \
        sanpath.forward(model, seqs, skip="off", mlp="none", layernorm="none").to_json()
    assert out.read_text() == one
    # The batches were shared, not run whole on each rank.
    notes = (tmp_path / "two.json.notes").read_text().splitlines()
    assert len(notes) == 2 and all(n.startswith("mpi: 2 ranks, 5 inputs round robin (rank 0: 3 in ") for n in notes), notes
    assert sanpath.distribution_notes() == []  # one process shares nothing


def test_path_shards_of_one_input_are_shared(mpirun, models, tmp_path):
    out = tmp_path / "paths.json"
    r = run_two_ranks(mpirun, tmp_path, os.path.join(models, "bert-ticket-classifier"), str(out))
    assert r.returncode == 0, r.stderr
    san = sanpath.random_model(5, 3, 12, std=0.4, seed=4)
    x = sanpath.random_input(6, seed=1)
    one = sanpath.enumerate_paths(san, x, skip="on", mlp="none", layernorm="none").to_json() + \
        sanpath.enumerate_paths(san, x, skip="on", mlp="none", layernorm="none", top=7).to_json() + \
        sanpath.sample_paths(san, x, 300, lengths=[3], seed=5, skip="on", mlp="none", layernorm="none").to_json()
    assert out.read_text() == one
    notes = (tmp_path / "paths.json.notes").read_text()
    assert "256 path subtrees round robin in 2 rounds (rank 0: 128 in " in notes, notes
    assert "5 blocks of 64 sampled paths round robin (rank 0: 3 in " in notes, notes


def test_an_error_on_rank_1_reaches_every_rank(mpirun, models, tmp_path):
    path = os.path.join(models, "bert-ticket-classifier")
    model = sanpath.load(path)
    sanpath.set_memory_budget("8MiB")
    try:
        with pytest.raises(sanpath.ResourceError) as alone:
            sanpath.forward(model, [[2, 3], list(range(1, 161)), [4, 5]])
    finally:
        sanpath.set_memory_budget(None)
    r = run_two_ranks(mpirun, tmp_path, path, "error", str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = [(tmp_path / f"rank{k}.txt").read_text() if (tmp_path / f"rank{k}.txt").exists() else None
             for k in (0, 1)]
    assert lines == [f"rank {k}: ResourceError: {alone.value}" for k in (0, 1)], r.stdout + r.stderr
