#!/usr/bin/python3
"""`sanpath forward --precision double` end to end on BERT-base, beside numpy.

    bench/cli_double.py --sanpath BUILD/sanpath [--rounds N] [--no-mpfr] [--dtype F32|F64] [--json]

Makes a BERT-base-shaped HuggingFace folder with `sanpath init --layout bert`
(L 12, H 12, d 768, d_ff 3072, vocab 30522, std 0.02; F32 as in issue 13 and
as HuggingFace ships BERT, or F64 with --dtype F64) and 128 seeded token ids,
then times whole processes, alternating within each round:
  rounding  sanpath forward --precision double --format json (digits by the rounding check;
            one input: the layers are streamed, read once for the three passes)
  whole     the same with --stream-layers off (every layer decoded into memory first)
  one pass  the same with --no-confirm (no digits)
  load      sanpath forward --random-input 1 as a pure SAN with --no-confirm: loading the
            checkpoint and a 1-token pass, i.e. the loading cost of the runs above
  numpy     bench/peers/forward_numpy_hf.py: load, embed, the same pass in float64 and the
            relative residuals; its erf time (math.erf per element) is subtracted
The CPU seconds (user + system) and the peak resident memory of every child
are recorded beside the wall times: on a machine shared with other work the
CPU seconds are the steadier figure; the memory is set against the weights
as doubles (every tensor of the file, 8 bytes each).
The floor row: the CPU seconds of one pass (one-pass run minus load run),
times the three passes of the rounding check, over the cores: what any check
by two more double passes needs beside loading, set against 0.5 x numpy.
And once (unless --no-mpfr) the old confirmation, --check mpfr (a run at 128 bits).
A figure is the median of its rounds. bench/run calls this and prints the ratios.
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

from load import weight_values  # bench/load.py: the elements of a folder's tensors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"


CPU = {}  # CPU seconds (user + system) of the last child, by what was timed
RSS = {}  # peak resident memory (bytes) of the child, by what was timed


def timed(cmd, what=None):
    """Wall seconds and stdout of one child; its CPU seconds go to CPU[what]."""
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"bench/cli_double.py: failed ({code}): {' '.join(cmd[:4])} ...: {stderr[-500:]}")
    if what:
        CPU.setdefault(what, []).append(ru.ru_utime + ru.ru_stime)
        RSS.setdefault(what, []).append(ru.ru_maxrss * 1024)  # Linux: kilobytes
    return dt, stdout


def run(sanpath, rounds, with_mpfr, dtype="F32"):
    out = {"seconds": {"rounding": [], "whole": [], "one_pass": [], "load": [], "numpy": [], "numpy_erf": []},
           "dtype": dtype}
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "bert-base")
        subprocess.run([sanpath, "init", "--layout", "bert", "--out", model, "--layers", "12", "--heads", "12",
                        "--d-model", "768", "--d-ff", "3072", "--vocab", "30522", "--std", "0.02", "--dtype", dtype],
                       check=True,
                       stdout=subprocess.DEVNULL)
        rng = random.Random(1)
        tokens = ",".join(str(rng.randrange(1, 30522)) for _ in range(128))
        fwd = [sanpath, "forward", "--model", model, "--tokens", tokens, "--precision", "double", "--format",
               "json", "--quiet"]
        load = [sanpath, "forward", "--model", model, "--random-input", "1", "--precision", "double", "--no-confirm",
                "--skip", "off", "--mlp", "none", "--layernorm", "none", "--format", "json", "--quiet"]
        peer = [PY, os.path.join(ROOT, "bench/peers/forward_numpy_hf.py"), model, tokens]
        S = out["seconds"]
        for _ in range(rounds):
            dt, text = timed(fwd, "rounding")
            S["rounding"].append(dt)
            sanpath_json = json.loads(text)
            S["whole"].append(timed(fwd + ["--stream-layers", "off"], "whole")[0])
            S["one_pass"].append(timed(fwd + ["--no-confirm"], "one_pass")[0])
            S["load"].append(timed(load, "load")[0])
            dt, text = timed(peer, "numpy")
            peer_json = json.loads(text)
            S["numpy"].append(dt - peer_json["erf_seconds"])
            S["numpy_erf"].append(peer_json["erf_seconds"])
        if with_mpfr:
            dt, text = timed(fwd + ["--check", "mpfr"])
            S["mpfr"] = [dt]
            mp = json.loads(text)
            out["digits_mpfr"] = [L["digits"] for L in mp["layers"]]
        out["weights_in_double"] = 8 * weight_values(model)
    layers = sanpath_json["layers"]
    out["check_method"] = sanpath_json["check_method"]
    out["digits_rounding"] = [L["digits"] for L in layers]
    out["numpy_vs_sanpath_max_rel_diff"] = max(
        abs(a - float(L["relative_residual"])) / float(L["relative_residual"])
        for a, L in zip(peer_json["relative_residual"], layers))
    out["median"] = {k: statistics.median(v) for k, v in S.items() if v}
    out["median_cpu"] = {k: statistics.median(v) for k, v in CPU.items()}
    out["peak_rss"] = {k: max(v) for k, v in RSS.items()}
    return out



def table(r):
    m = r["median"]
    rows = [(f"BERT-base {r.get('dtype', 'F64')} n128 CLI end to end: forward --precision double (rounding check)",
             f"{m['rounding']:.2f} s (load {m['load']:.2f} s, one pass {m['one_pass']:.2f} s)")]
    rows.append(("  the same held whole (--stream-layers off)",
                 f"{m['whole']:.2f} s" + (f" ({r['median_cpu']['whole']:.2f} CPU s)" if r.get("median_cpu") else "")))
    if "mpfr" in m:
        rows.append(("  the same with --check mpfr (128-bit run; before: the default)",
                     f"{m['mpfr']:.2f} s = {m['mpfr'] / m['rounding']:.1f}x the rounding check"))
    rows.append(("  numpy peer end to end (load + embed + pass + residuals; erf time removed)",
                 f"{m['numpy']:.2f} s (+ {m['numpy_erf']:.2f} s in math.erf)"))
    rows.append(("  sanpath / numpy, whole CLI run", f"{m['rounding'] / m['numpy']:.2f}"))
    rows.append(("  sanpath / numpy, without loading (sanpath minus its load run)",
                 f"{(m['rounding'] - m['load']) / m['numpy']:.2f}"))
    c = r.get("median_cpu")
    if c:
        rows.append(("  CPU s (user + system): rounding check, one pass, load; numpy (erf included)",
                     f"{c['rounding']:.2f}, {c['one_pass']:.2f}, {c['load']:.2f}; {c['numpy']:.2f}"))
        rows.append(("  sanpath / numpy in CPU s, whole CLI run", f"{c['rounding'] / c['numpy']:.2f}"))
        # What three double passes cost at least, loading aside: the CPU of one
        # pass (one-pass run minus load run) three times, spread over every core.
        cores = os.cpu_count() or 1
        one = c["one_pass"] - c["load"]
        rows.append((f"  floor of 3 double passes on {cores} cores (3 x pass CPU / cores; no loading)",
                     f"3 x {one:.2f} / {cores} = {3 * one / cores:.2f} s vs 0.5 x numpy = {0.5 * m['numpy']:.2f} s"))
    rss, w = r.get("peak_rss"), r.get("weights_in_double")
    if rss and w:
        mb = 1e6
        rows.append(("  peak RSS: rounding check, one pass, held whole; the weights in double",
                     f"{rss['rounding'] / mb:.0f}, {rss['one_pass'] / mb:.0f}, {rss['whole'] / mb:.0f} MB; "
                     f"{w / mb:.0f} MB"))
        rows.append(("  peak RSS / weights in double: rounding check, one pass",
                     f"{rss['rounding'] / w:.2f}, {rss['one_pass'] / w:.2f}"))
    rows.append(("  digits (rounding check) per layer", " ".join(map(str, r["digits_rounding"]))))
    if "digits_mpfr" in r:
        rows.append(("  digits (--check mpfr) per layer", " ".join(map(str, r["digits_mpfr"]))))
    rows.append(("  numpy relative residuals vs sanpath: max rel. difference",
                 f"{r['numpy_vs_sanpath_max_rel_diff']:.1e}"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sanpath", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-mpfr", action="store_true", help="skip the one --check mpfr run (about a minute)")
    ap.add_argument("--dtype", choices=["F32", "F64"], default="F32",
                    help="the checkpoint's tensor dtype (default F32, the issue's folder)")
    ap.add_argument("--json", action="store_true", help="print the raw results as one JSON line")
    a = ap.parse_args()
    r = run(os.path.abspath(a.sanpath), a.rounds, not a.no_mpfr, a.dtype)
    if a.json:
        print(json.dumps(r))
    else:
        for k, v in table(r):
            print(f"{k:<80}  {v}")


if __name__ == "__main__":
    main()
