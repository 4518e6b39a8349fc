#!/usr/bin/python3
"""Every pass of one layer map against another build, end to end as a user runs it.

    bench/cli_passes.py SANPATH --baseline OTHER_SANPATH [--rounds N] [--tokens N] [--tmp DIR]

Writes a BERT-base-shaped HuggingFace folder (`init --layout bert --dtype F32`:
L 12, H 12, d 768, d_ff 3072, vocab 30522, std 0.02) and seeded token ids,
then times each command below with both binaries, alternating them within
every round (whole processes: loading included):
  san auto       forward --skip off --mlp none --layernorm none  (auto: the centred pass, confirmed)
  double         forward --precision double                      (the rounding check)
  certified san  forward --skip off --mlp none --layernorm none --check certified
  emulate bf16   forward --emulate bf16
and a 12-layer SAN of a random Llama (init --layout llama, d 256) with auto
(rotary logits: the centred pass's positional path, or the direct ladder of
a baseline whose centred pass refuses the family) and with --check certified
(the centred balls' positional path, or the direct balls).
Prints one JSON line per command: medians of wall and CPU seconds (user +
system) of each binary and their ratios (this / baseline); for the certified
commands also each binary's pass, tier and least digits proven. On a machine
shared with other work the CPU seconds are the steadier figure.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd):
    """Wall and CPU seconds (user + system) of one child process."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench/cli_passes.py: {' '.join(cmd)} failed: {p.stderr.read().decode()[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sanpath")
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--tmp", default=None)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(dir=args.tmp)
    bert, llama = os.path.join(tmp, "bert-base"), os.path.join(tmp, "llama")
    subprocess.run([args.sanpath, "init", "--layout", "bert", "--dtype", "F32", "--out", bert, "--layers", "12",
                    "--heads", "12", "--d-model", "768", "--d-ff", "3072", "--vocab", "30522", "--seed", "5"],
                   check=True)
    subprocess.run([args.sanpath, "init", "--layout", "llama", "--out", llama, "--layers", "12", "--heads", "8",
                    "--d-model", "256", "--d-ff", "512", "--vocab", "1000", "--std", "0.1", "--seed", "5"],
                   check=True)
    ids = ",".join(str((37 * k + 11) % 30000 + 100) for k in range(args.tokens))
    small_ids = ",".join(str((37 * k + 11) % 900 + 50) for k in range(args.tokens))
    san = ["--skip", "off", "--mlp", "none", "--layernorm", "none"]
    cases = {
        "san auto": ["forward", "--model", bert, "--tokens", ids] + san,
        "double": ["forward", "--model", bert, "--tokens", ids, "--precision", "double"],
        "certified san": ["forward", "--model", bert, "--tokens", ids, "--check", "certified"] + san,
        "emulate bf16": ["forward", "--model", bert, "--tokens", ids, "--emulate", "bf16"],
        "llama san auto": ["forward", "--model", llama, "--tokens", small_ids] + san,
        "llama san certified": ["forward", "--model", llama, "--tokens", small_ids, "--check", "certified"] + san,
    }
    for name, tail in cases.items():
        this, base = [], []
        for _ in range(args.rounds):
            base.append(run([args.baseline] + tail))
            this.append(run([args.sanpath] + tail))
        med = lambda xs, k: statistics.median(x[k] for x in xs)
        line = {
            "case": name, "command": "sanpath " + " ".join(tail).replace(tmp + "/", ""),
            "wall_s": med(this, 0), "cpu_s": med(this, 1),
            "baseline_wall_s": med(base, 0), "baseline_cpu_s": med(base, 1),
            "ratio_wall": med(this, 0) / med(base, 0), "ratio_cpu": med(this, 1) / med(base, 1),
        }
        if "certified" in name:  # what the time bought: the pass and the least digits proven at any layer
            for key, binary in (("", args.sanpath), ("baseline_", args.baseline)):
                j = json.loads(subprocess.run([binary] + tail + ["--format", "json"], check=True,
                                              capture_output=True, text=True).stdout)
                line[key + "method"] = j["method"]
                line[key + "bits"] = j["precision_bits"]
                line[key + "least_digits"] = min(r["digits"] for r in j["layers"])
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
