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

    bench/load.py SANPATH --family gpt_neox [--layers 18] [--rounds N] [--tmp DIR]

Loading of another family against BERT-base, per byte (issue: "loading stays
at memory speed for every family"): writes the BERT-base folder above and a
GPT-NeoX folder (`init --layout gpt_neox --dtype F32`, default 18 layers of
d 2048, d_ff 8192, 16 heads, vocab 50304: 1.0e9 weights, 4.0 GB), then times
the one-token forward with --stream-layers on of each, alternating, and
prints both rates in MiB of layer tensors read per second (wall and CPU; the
word table is not read for a random input) and their ratio.
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
    ap.add_argument("--family", help="compare this layout's streamed load with BERT-base's, per byte")
    ap.add_argument("--layers", type=int, default=18, help="--family: layers of the family's checkpoint")
    a = ap.parse_args()
    if a.family:
        family_rates(a)
        return
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


def layer_bytes(folder):
    """Bytes of the per-layer tensors (what a streamed one-token pass decodes; the word table is not read)."""
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items()
               if k != "__metadata__" and (".layer." in k or ".layers." in k or k.startswith("layers.")))


def family_rates(a):
    """MiB of file per second of the streamed one-token forward: BERT-base against a's family."""
    with tempfile.TemporaryDirectory(dir=a.tmp) as tmp:
        folders = {"bert": os.path.join(tmp, "bert-base"), a.family: os.path.join(tmp, a.family)}
        subprocess.run([a.sanpath, "init", "--layout", "bert", "--out", folders["bert"], "--layers", "12", "--heads",
                        "12", "--d-model", "768", "--d-ff", "3072", "--vocab", "30522", "--std", "0.02", "--dtype",
                        "F32"], check=True)
        big = [a.sanpath, "init", "--layout", a.family, "--out", folders[a.family], "--layers", str(a.layers),
               "--heads", "16", "--d-model", "2048", "--d-ff", "8192", "--vocab", "50304", "--std", "0.02",
               "--dtype", "F32"]
        if a.family == "vit":
            sys.exit("bench/load.py: --family vit: token inputs only here")
        subprocess.run(big, check=True)
        res = {k: {"wall": [], "cpu": [], "rss": []} for k in folders}
        for _ in range(a.rounds):
            for name, folder in folders.items():
                t, cpu, m = run([a.sanpath, "forward", "--model", folder, "--precision", "double", "--no-confirm",
                                 "--random-input", "1", "--stream-layers", "on"])
                res[name]["wall"].append(t)
                res[name]["cpu"].append(cpu)
                res[name]["rss"].append(m)
        out = {}
        for name, folder in folders.items():
            mib = layer_bytes(folder) / 2**20
            wall, cpu = statistics.median(res[name]["wall"]), statistics.median(res[name]["cpu"])
            out[name] = {"layers_MiB": mib, "wall_s": wall, "cpu_s": cpu, "peak_rss_MiB": statistics.median(res[name]["rss"]),
                         "MiB_per_s_wall": mib / wall, "MiB_per_s_cpu": mib / cpu}
        out["rate_ratio_wall"] = out[a.family]["MiB_per_s_wall"] / out["bert"]["MiB_per_s_wall"]
        out["rate_ratio_cpu"] = out[a.family]["MiB_per_s_cpu"] / out["bert"]["MiB_per_s_cpu"]
        print(json.dumps(out))


if __name__ == "__main__":
    main()
