#!/usr/bin/python3
"""The double GEMM rate of sanpath's kernel against Eigen's, one thread each.

    bench/dgemm_rate.py [--build-dir DIR] [--rounds N]

Runs DIR/bench/bench_dgemm (sanpath's gemm<double> at every instruction-set
level this CPU runs) and DIR/bench/bench_dgemm_eigen (Eigen 3.4 built with
-march=native: its AVX2/AVX-512 kernels, the fastest Eigen this CPU gets)
alternately, N rounds (default 5), on the products of one BERT-base layer at
n = 128, and prints the median GFLOP/s of each shape and of the whole layer
(its products weighted by how often a layer runs them), with the ratio of
each level to Eigen's. DIR defaults to build-bench (bench/run builds it).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(build_dir, rounds):
    """Medians over `rounds` alternating runs: ({(who, product): GFLOP/s}, Eigen's SIMD line)."""
    exe = {name: os.path.join(build_dir, "bench", name) for name in ("bench_dgemm", "bench_dgemm_eigen")}
    for path in exe.values():
        if not os.access(path, os.X_OK):
            sys.exit(f"bench/dgemm_rate.py: {path} not found (build with -DSANPATH_BUILD_BENCH=ON, or bench/run)")
    runs = {}
    simd = ""
    for _ in range(rounds):
        for name in ("bench_dgemm", "bench_dgemm_eigen"):
            out = json.loads(subprocess.run([exe[name]], check=True, capture_output=True, text=True).stdout)
            simd = out.pop("simd", simd)
            for who, rates in out.items():
                if who == "layer":
                    continue
                for shape, r in rates.items():
                    runs.setdefault((who, shape), []).append(r)
            for who, r in out["layer"].items():
                runs.setdefault((who, LAYER), []).append(r)
    return {k: statistics.median(v) for k, v in runs.items()}, simd


LAYER = "one BERT-base layer"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build-bench"))
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    med, simd = measure(a.build_dir, a.rounds)
    who = sorted({w for w, _ in med}, key=lambda w: (w == "eigen", w))
    shapes = list(dict.fromkeys(s for _, s in med))
    print(f"GFLOP/s, one thread, median of {a.rounds} rounds; eigen = Eigen built with -march=native ({simd})")
    print(f"{'product':34s}" + "".join(f"{w:>10s}" for w in who) + "".join(f"{w + '/eigen':>14s}" for w in who if w != "eigen"))
    for s in shapes:
        row = f"{s:34s}" + "".join(f"{med[(w, s)]:10.2f}" for w in who)
        row += "".join(f"{med[(w, s)] / med[('eigen', s)]:14.2f}" for w in who if w != "eigen")
        print(row)


if __name__ == "__main__":
    main()
