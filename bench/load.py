#!/usr/bin/python3
"""Loading a BERT-base-shaped HuggingFace folder, end to end as a user runs it.

    bench/load.py SANPATH [--baseline OTHER_SANPATH] [--rounds N] [--tmp DIR]

Writes the folder with `sanpath init --layout bert --dtype F32` (L 12, H 12,
d 768, d_ff 3072, vocab 30522: 341 MB), then times, alternating the
contenders within each round:
  load:    `forward --precision double --no-confirm --random-input 1` (a
           one-token forward: loading plus ~0.1 GFLOP);
  forward: `forward --precision double --no-confirm --tokens <128 ids>`, whose
           peak RSS (getrusage of the child) is compared with the analysed
           weights in double (every tensor of the folder, 8 bytes a value);
  streamed: the same forward with --stream-layers on (this sanpath only): each
           layer read from the file when the pass reaches it.
This sanpath's load and forward runs pass --stream-layers off: `forward` of one
input streams by default, and these rows measure the model held whole.
Prints one JSON line: medians of wall and CPU seconds, peak RSS in MiB, the
weights' MiB. On a loaded machine the CPU seconds are the steadier figure.
"""
import argparse
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time


def run(cmd):
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one child process."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    err = p.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench/load.py: {' '.join(cmd)} failed: {err[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def weight_values(folder):
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    total = 0
    for k, v in header.items():
        if k != "__metadata__":
            c = 1
            for s in v["shape"]:
                c *= s
            total += c
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sanpath")
    ap.add_argument("--baseline", help="another sanpath binary timed side by side")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tmp", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.tmp) as tmp:
        folder = os.path.join(tmp, "bert-base")
        subprocess.run([a.sanpath, "init", "--layout", "bert", "--out", folder, "--layers", "12", "--heads", "12",
                        "--d-model", "768", "--d-ff", "3072", "--vocab", "30522", "--std", "0.02", "--dtype", "F32"],
                       check=True)
        tokens = ",".join(str((i * 7919) % 30522) for i in range(128))
        contenders = {"sanpath": a.sanpath}
        if a.baseline:
            contenders["baseline"] = a.baseline
        res = {k: {f"{w}{m}": [] for w in ("load", "forward", "streamed") for m in ("", "_cpu", "_rss")}
               for k in contenders}
        for _ in range(a.rounds):
            for name, exe in contenders.items():
                runs = [("load", ["--random-input", "1"]), ("forward", ["--tokens", tokens])]
                if name == "sanpath":
                    # One input streams by default now: load and forward measure the model held whole.
                    runs = [(w, inp + ["--stream-layers", "off"]) for w, inp in runs]
                    runs.append(("streamed", ["--tokens", tokens, "--stream-layers", "on"]))
                for what, inp in runs:
                    t, cpu, m = run([exe, "forward", "--model", folder, "--precision", "double", "--no-confirm"] + inp)
                    res[name][what].append(t)
                    res[name][what + "_cpu"].append(cpu)
                    res[name][what + "_rss"].append(m)
        out = {"file_MiB": os.path.getsize(os.path.join(folder, "model.safetensors")) / 2**20,
               "weights_double_MiB": weight_values(folder) * 8 / 2**20}
        for name, r in res.items():
            out[name] = {k: statistics.median(v) for k, v in r.items() if v}
        print(json.dumps(out))


if __name__ == "__main__":
    main()
