#!/usr/bin/python3
"""Thread scaling of single passes, end to end as a user runs them.

    bench/cli_threads.py --sanpath BUILD/sanpath [--threads 1,2,4,8,16] [--rounds N] [--json] [--save DIR]

Makes a BERT-base-shaped HuggingFace folder with `sanpath init --layout bert`
(L 12, H 12, d 768, d_ff 3072, vocab 30522, std 0.02, F32, seed 1) and times
whole processes at each thread count (`--threads T`), alternating within
each round:
  san     forward --random-input 128 --skip off --mlp none --layernorm none
          --precision auto (issue 29's pure SAN: the centred pass and its
          confirming run one tier up, side by side)
  double  forward --tokens <128 seeded ids> --precision double (the full
          model, its two rounding passes beside the nearest one)
Every run's JSON must be byte-identical to the first thread count's: a
differing output stops the benchmark. Prints per command and thread count
the median wall seconds, the CPU seconds (user + system; their ratio to the
wall time is the cores kept busy) and the speed-up over the first thread
count. Thread counts above os.cpu_count() are skipped. --save DIR writes
each command's JSON there (san.json, double.json), to compare the bytes with
another machine's.
"""
import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, check=True, stdout=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout


def run(sanpath, counts, rounds, save=None):
    out = {"threads": counts, "wall": {}, "cpu": {}}
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "bert-base")
        subprocess.run([sanpath, "init", "--layout", "bert", "--out", model, "--layers", "12", "--heads", "12",
                        "--d-model", "768", "--d-ff", "3072", "--vocab", "30522", "--std", "0.02", "--dtype", "F32",
                        "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
        rng = random.Random(1)
        tokens = ",".join(str(rng.randrange(1, 30522)) for _ in range(128))
        commands = {
            "san": [sanpath, "forward", "--model", model, "--random-input", "128", "--skip", "off", "--mlp", "none",
                    "--layernorm", "none", "--precision", "auto", "--format", "json", "--quiet"],
            "double": [sanpath, "forward", "--model", model, "--tokens", tokens, "--precision", "double",
                       "--format", "json", "--quiet"],
        }
        reference = {}
        for name in commands:
            out["wall"][name] = {t: [] for t in counts}
            out["cpu"][name] = {t: [] for t in counts}
        for _ in range(rounds):
            for name, cmd in commands.items():
                for t in counts:
                    wall, cpu, text = timed(cmd + ["--threads", str(t)])
                    if name not in reference:
                        reference[name] = text
                    elif text != reference[name]:
                        sys.exit(f"cli_threads: {name} at --threads {t} printed other bytes than at "
                                 f"--threads {counts[0]}")
                    out["wall"][name][t].append(wall)
                    out["cpu"][name][t].append(cpu)
                    print(f"  {name} --threads {t}: {wall:.2f} s wall, {cpu:.2f} s CPU", file=sys.stderr, flush=True)
        if save:
            os.makedirs(save, exist_ok=True)
            for name, text in reference.items():
                with open(os.path.join(save, name + ".json"), "wb") as f:
                    f.write(text)
    out["median_wall"] = {n: {t: statistics.median(v) for t, v in d.items()} for n, d in out["wall"].items()}
    out["median_cpu"] = {n: {t: statistics.median(v) for t, v in d.items()} for n, d in out["cpu"].items()}
    return out


def table(r):
    rows = []
    for name, label in (("san", "12-layer BERT-base-shaped pure SAN, n = 128, auto"),
                        ("double", "full BERT-base, n = 128, --precision double")):
        w, c = r["median_wall"][name], r["median_cpu"][name]
        base = w[r["threads"][0]]
        for t in r["threads"]:
            rows.append((f"{label}, --threads {t}",
                         f"{w[t]:.2f} s wall, {c[t]:.2f} s CPU ({c[t] / w[t]:.1f} cores busy), "
                         f"{base / w[t]:.2f}x over --threads {r['threads'][0]}"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sanpath", required=True)
    ap.add_argument("--threads", default="1,2,4,8,16", help="thread counts, comma-separated (default 1,2,4,8,16)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--save", help="write each command's JSON output into this folder")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    counts = [int(x) for x in a.threads.split(",") if x.strip()]
    counts = [t for t in counts if 1 <= t <= cores] or [1]
    r = run(a.sanpath, counts, a.rounds, a.save)
    r["cores"] = cores
    if a.json:
        print(json.dumps(r, indent=1))
        return
    print(f"cores: {cores}")
    for k, v in table(r):
        print(f"{k:<78} {v}")


if __name__ == "__main__":
    main()
