#!/usr/bin/python3
"""Issue 28's targets, end to end as a user runs the commands, side by side.

    bench/cli_measures.py --sanpath BUILD/sanpath [--rounds N] [--json] [--skip-emulate]

Makes a BERT-base-shaped HuggingFace folder with `sanpath init --layout bert`
(L 12, H 12, d 768, d_ff 3072, vocab 30522, std 0.02, F32) and 128 seeded
token ids, then times whole processes, alternating within each round:
  plain      sanpath forward --precision auto (the model as trained, centred pass, confirmed)
  measures   the same with --measures all
  double     sanpath forward --precision double
  bf16       the same with --emulate bf16 (when the build has it)
and once, the pure SAN of the same weights (--skip off --mlp none --layernorm
none) with --measures all: the least confirmed digits of every measure over
every layer, and the smallest value reached (the residuals go to ~1e-500000).
Targets (issue 28): measures/plain <= 2, every SAN measure >= 15 digits,
bf16/double <= 3. A figure is the median of its rounds.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd):
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"bench/cli_measures.py: failed ({p.returncode}): {' '.join(cmd[:6])} ...: {p.stderr[-500:]}")
    return dt, p.stdout


def has_option(sanpath, option):
    return option in subprocess.run([sanpath, "forward", "--help"], capture_output=True, text=True).stdout


def run(sanpath, rounds, emulate):
    S = {"plain": [], "measures": [], "double": [], "bf16": []}
    out = {"seconds": S}
    emulate = emulate and has_option(sanpath, "--emulate")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "bert-base")
        subprocess.run([sanpath, "init", "--layout", "bert", "--out", model, "--layers", "12", "--heads", "12",
                        "--d-model", "768", "--d-ff", "3072", "--vocab", "30522", "--std", "0.02", "--dtype", "F32"],
                       check=True, stdout=subprocess.DEVNULL)
        rng = random.Random(1)
        tokens = ",".join(str(rng.randrange(1, 30522)) for _ in range(128))
        base = [sanpath, "forward", "--model", model, "--tokens", tokens, "--format", "json", "--quiet"]
        for _ in range(rounds):
            S["plain"].append(timed(base)[0])
            S["measures"].append(timed(base + ["--measures", "all"])[0])
            S["double"].append(timed(base + ["--precision", "double"])[0])
            if emulate:
                S["bf16"].append(timed(base + ["--precision", "double", "--emulate", "bf16"])[0])
        dt, text = timed(base + ["--skip", "off", "--mlp", "none", "--layernorm", "none", "--measures", "all"])
        out["san_seconds"] = dt
        j = json.loads(text)
        least, smallest = {}, {}
        for L in j["layers"]:
            for k, v in L["measures"].items():
                d = L["digits_by_quantity"][k]
                least[k] = min(least.get(k, 10**9), d if d is not None else -1)
                e = int(v.split("e")[1]) if "e" in v else 0
                smallest[k] = min(smallest.get(k, 0), e)
        out["san_least_digits"] = least
        out["san_smallest_exponent"] = smallest
        out["san_relative_residual_last"] = j["layers"][-1]["relative_residual"]
    out["median"] = {k: statistics.median(v) for k, v in S.items() if v}
    return out


def table(r):
    m = r["median"]
    rows = [("BERT-base F32 n128 forward --precision auto (as trained)", f"{m['plain']:.1f} s"),
            ("  the same with --measures all", f"{m['measures']:.1f} s = {m['measures'] / m['plain']:.2f}x (target <= 2)")]
    least = min(r["san_least_digits"].values())
    rows.append(("pure SAN of the same weights, --measures all: least confirmed digits of any measure, any layer",
                 f"{least} (target >= 15; {r['san_seconds']:.1f} s; last residual {r['san_relative_residual_last']})"))
    for k, d in r["san_least_digits"].items():
        rows.append((f"  {k}", f"{d} digits, down to 1e{r['san_smallest_exponent'][k]}"))
    if "bf16" in m:
        rows.append(("forward --precision double", f"{m['double']:.2f} s"))
        rows.append(("  the same with --emulate bf16", f"{m['bf16']:.2f} s = {m['bf16'] / m['double']:.2f}x (target <= 3)"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sanpath", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip-emulate", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the raw results as one JSON line")
    a = ap.parse_args()
    r = run(os.path.abspath(a.sanpath), a.rounds, not a.skip_emulate)
    if a.json:
        print(json.dumps(r))
    else:
        for what, value in table(r):
            print(f"{what:<100} {value}")


if __name__ == "__main__":
    main()
