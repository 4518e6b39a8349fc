#!/usr/bin/python3
"""MPI scaling of a batch or of one input's path shards, end to end as a user runs it.

    bench/cli_mpi.py --sanpath BUILD/sanpath [--job batch|enumerate|top|sample] [--ranks 2] [--batch 64]
                     [--rounds N] [--json]

Makes a small BERT-shaped HuggingFace folder with `sanpath init --layout
bert` (L 4, H 4, d 64, d_ff 128, vocab 100, std 0.1, F32, seed 1; L 6 for
enumerate and sample, L 8 for top) and times whole commands, alternating
within each round:
  one      the job's command with --threads 1; batch: sanpath forward
           --model M --random-input 24 --batch B --seed 1 --precision auto
           --format json; enumerate: sanpath paths --model M --random-input
           24 --seed 1 --skip on --mlp none --layernorm none --enumerate
           --format json (5^6 paths, confirmed at a second precision); top:
           the same with --top 10 (5^8 paths); sample: --sample 2000
  threads  the same with --threads K (one process, K threads)
  mpi      mpirun -np K --oversubscribe sanpath ... --threads 1 (K ranks,
           one thread each)
Every output must be byte-identical to the first: a differing output stops
the benchmark. Prints the median wall seconds of each and the speed-ups
one/mpi (issue 29's target: >= 1.8 at K = 2) and one/threads.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sanpath", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--job", choices=["batch", "enumerate", "top", "sample"], default="batch")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        sys.exit("cli_mpi: mpirun not found (scripts/install-deps installs openmpi-bin)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "m")
        layers = {"batch": "4", "enumerate": "6", "top": "8", "sample": "6"}[args.job]
        subprocess.run([args.sanpath, "init", "--out", model, "--layout", "bert", "--layers", layers, "--heads", "4",
                        "--d-model", "64", "--d-ff", "128", "--vocab", "100", "--std", "0.1", "--seed", "1",
                        "--dtype", "F32"], check=True, stdout=subprocess.DEVNULL)
        if args.job == "batch":
            base = [args.sanpath, "forward", "--model", model, "--random-input", "24", "--batch", str(args.batch),
                    "--seed", "1", "--precision", "auto", "--format", "json", "-q"]
        else:
            base = [args.sanpath, "paths", "--model", model, "--random-input", "24", "--seed", "1", "--skip", "on",
                    "--mlp", "none", "--layernorm", "none", "--format", "json", "-q"]
            base += {"enumerate": ["--enumerate"], "top": ["--enumerate", "--top", "10"],
                     "sample": ["--sample", "2000"]}[args.job]
        runs = {
            "one": base + ["--threads", "1"],
            "threads": base + ["--threads", str(args.ranks)],
            "mpi": [mpirun, "-np", str(args.ranks), "--oversubscribe"] + base + ["--threads", "1"],
        }
        times = {k: [] for k in runs}
        reference = None
        for _ in range(args.rounds):
            for name, cmd in runs.items():
                t0 = time.perf_counter()
                p = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                times[name].append(time.perf_counter() - t0)
                if reference is None:
                    reference = p.stdout
                elif p.stdout != reference:
                    sys.exit(f"cli_mpi: {name}'s output differs from the first run's")
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {"job": args.job, "ranks": args.ranks, "batch": args.batch, "cpus": os.cpu_count(), "median_s": med,
              "speedup_mpi": med["one"] / med["mpi"], "speedup_threads": med["one"] / med["threads"]}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    what = {"batch": f"batch of {args.batch} inputs (forward --random-input 24, auto precision)",
            "enumerate": "paths --enumerate, 5^6 paths of one input (auto precision)",
            "top": "paths --enumerate --top 10, 5^8 paths of one input (auto precision)",
            "sample": "paths --sample 2000, every length of one input (auto precision)"}[args.job]
    print(f"{what}, {os.cpu_count()} cpus, median of {args.rounds}; every output byte-identical")
    print(f"  1 process, 1 thread            {med['one']:8.2f} s")
    print(f"  1 process, {args.ranks} threads           {med['threads']:8.2f} s   {result['speedup_threads']:.2f}x")
    print(f"  mpirun -np {args.ranks}, 1 thread each   {med['mpi']:8.2f} s   {result['speedup_mpi']:.2f}x "
          f"(target >= 1.8x at 2 ranks)")


if __name__ == "__main__":
    main()
