#!/usr/bin/python3
"""What proven digits cost: `sanpath forward --check certified` beside the confirmed run, end to end.

    bench/cli_certified.py --sanpath BUILD/sanpath [--shared ../shared] [--bert-base] [--cases A,B] [--rounds N]
                           [--json]

Times whole commands as a user runs them (load included), alternating the
two within each round, on:
  real     the trained checkpoints of ../shared/data/real-models (bert-ticket-
           classifier, gpt2-capp, llama-stories260k, llama-tinystories-xs) as
           trained, 8 token ids
  small    a BERT-shaped folder from `sanpath init --layout bert` (L 6, H 4,
           d 64, d_ff 256, vocab 100, std 0.1, F32, seed 1), 32 seeded tokens
  bertbase with --bert-base: the BERT-base-shaped F32 folder (L 12, H 12,
           d 768, d_ff 3072, vocab 30522, std 0.02, seed 1), 128 seeded
           tokens (minutes per run)
each `sanpath forward --model M --tokens T --format json` with `--check auto`
(confirmed: a second run one tier up) and `--check certified` (one run in
ball arithmetic); the small and BERT-base folders also as pure SANs (`--skip
off --mlp none --layernorm none`: the centred pass, residuals far below 1e-100
in BERT-base's last layers); and `sanpath collapse` on its embedded default
(the README's Figure-2 table, four variants to 1e-1113622); and `sanpath bounds` on
the small folder's pure SAN (the optimal centre's enclosures; certified: proven verdicts), and
`sanpath paths --sums` on its attention-only network with skip (certified: the length sums on balls), and
`paths --enumerate --top 10` on the same (certified: the ten selected terms on balls), and
`paths --effectiveness` on the same and on gpt2-capp with its LM head (certified: the truncations, the
head's logits, KL and agreement on balls; the least digits over k < L, k = L being 0 exactly), and
`paths --effectiveness --rerun 8 --repeats 3` on gpt2-capp's attention-only network and on the small
folder as trained (certified: every sub-network on balls; the least digits of the mean distances).
Prints the median wall seconds of each, the ratio
certified/confirmed (issue 27's target on BERT-base: <= 2), the working
precision of each and the least digits of each run; the certified run's
printed values must agree with the confirmed run's to the digits both claim.
"""
import argparse
import decimal
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time


def agree(a, b, digits):
    """The two printed numbers agree to `digits` significant digits (within one unit of the last)."""
    if a.startswith("<") or b.startswith("<"):
        return True
    x, y = decimal.Decimal(a), decimal.Decimal(b)  # exponents far beyond double's (1e-1113622)
    return abs(x - y) <= decimal.Decimal(10) ** (1 - digits) * max(abs(x), abs(y))


def values(j):
    """[(label, printed value, digits)] of a forward, collapse, bounds or paths --sums/--enumerate JSON, and its working
    precision."""
    if "paths" in j:  # path terms: every listed path's ||T||_{1,inf}
        return ([(f"path {p['heads']} norm", p["term_norm"]["composite"], p["digits"]) for p in j["paths"]],
                j["precision"])
    if "length_sums" in j:  # every length's ||S_k||_F and share
        return ([(f"S_{s['length']} {q}", s["norm"]["frobenius"] if q == "frobenius" else s["share"],
                  s["digits_by_quantity"][q]) for s in j["length_sums"] for q in ("frobenius", "share")],
                j["precision"])
    if "effectiveness" in j and "rerun" in j:  # re-runs: every length's mean distance over the repetitions
        return ([(f"k={e['length']} re-run distance", e["rerun"]["distance"]["mean"],
                  e["rerun"]["distance"]["digits"]["mean"]) for e in j["effectiveness"]], j["precision"])
    if "effectiveness" in j:  # every k < L's distance and KL (at k = L both are 0 exactly: a bound)
        return ([(f"k={e['length']} {q}", e[q], e["digits"]) for e in j["effectiveness"][:-1]
                 for q in ("distance", "kl") if e[q] is not None], j["precision"])
    if "depths" in j:  # bounds: r_0 .. r_L, the upper ends of the optimal centre's enclosures
        ms = [j["r0"]] + [d["measured"] for d in j["depths"]]
        return [(f"r_{l}", m["upper_end"], m["digits"]) for l, m in enumerate(ms)], j["precision"]
    runs = j["variants"] if "variants" in j else [j]
    return ([(f"{v.get('name', '')} layer {l['layer']}", l["relative_residual"], l["digits"])
             for v in runs for l in v["layers"]], runs[0]["precision"])


def run(cmd):
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t, json.loads(out)


def main():
    decimal.getcontext().prec = 120
    decimal.getcontext().Emin, decimal.getcontext().Emax = -999999999, 999999999
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sanpath", required=True)
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    ap.add_argument("--bert-base", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", help="comma-separated case names to run (default: all), e.g. bertbase-san")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        real = os.path.join(args.shared, "data", "real-models")
        for name in ("bert-ticket-classifier", "gpt2-capp"):
            if os.path.isdir(os.path.join(real, name)):
                cases.append((name, [args.sanpath, "forward", "--model", os.path.join(real, name), "--tokens",
                                     "2,15,27,3,40,11,8,19"]))
        for name in ("llama-stories260k", "llama-tinystories-xs"):  # the direct pass: rotary
            if os.path.isdir(os.path.join(real, name)):
                cases.append((name, [args.sanpath, "forward", "--model", os.path.join(real, name), "--tokens",
                                     "1,403,407,261,378,432,383,286"]))
        sizes = [("small", ["--layers", "6", "--heads", "4", "--d-model", "64", "--d-ff", "256", "--vocab", "100",
                            "--std", "0.1"], 100, 32)]
        if args.bert_base:
            sizes.append(("bertbase", ["--layers", "12", "--heads", "12", "--d-model", "768", "--d-ff", "3072",
                                       "--vocab", "30522", "--std", "0.02"], 30522, 128))
        for name, opts, vocab, n in sizes:
            folder = os.path.join(tmp, name)
            subprocess.run([args.sanpath, "init", "--out", folder, "--layout", "bert", "--seed", "1", "--dtype", "F32"]
                           + opts, check=True, stdout=subprocess.DEVNULL)
            tokens = ",".join(str(rng.randrange(1, vocab)) for _ in range(n))
            if name == "small":
                small_tokens = tokens
            cases.append((name, [args.sanpath, "forward", "--model", folder, "--tokens", tokens]))
            cases.append((name + "-san", [args.sanpath, "forward", "--model", folder, "--tokens", tokens,
                                          "--skip", "off", "--mlp", "none", "--layernorm", "none"]))
        if os.path.isdir(os.path.join(real, "gpt2-capp")):  # paths --effectiveness: the LM head on every truncation
            cases.append(("gpt2-effectiveness", [args.sanpath, "paths", "--effectiveness", "--model",
                                                 os.path.join(real, "gpt2-capp"), "--tokens", "1,5,9,13,20,2,7,11",
                                                 "--skip", "on", "--mlp", "none", "--layernorm", "none"]))
        if os.path.isdir(os.path.join(real, "gpt2-capp")):  # --rerun: the paper's sub-networks (in balls: certified)
            cases.append(("gpt2-rerun", [args.sanpath, "paths", "--effectiveness", "--rerun", "8", "--repeats", "3",
                                         "--model", os.path.join(real, "gpt2-capp"), "--tokens", "1,5,9,13,20,2,7,11",
                                         "--skip", "on", "--mlp", "none", "--layernorm", "none"]))
        cases.append(("collapse", [args.sanpath, "collapse"]))
        folder = os.path.join(tmp, "small")
        cases.append(("small-san-bounds", [args.sanpath, "bounds", "--model", folder, "--tokens", small_tokens,
                                           "--skip", "off", "--mlp", "none", "--layernorm", "none"]))
        # paths --sums: confirmed (--check auto), certified with --check certified
        cases.append(("small-sums", [args.sanpath, "paths", "--sums", "--model", folder, "--tokens", small_tokens,
                                     "--skip", "on", "--mlp", "none", "--layernorm", "none"]))
        cases.append(("small-effectiveness", [args.sanpath, "paths", "--effectiveness", "--model", folder,
                                              "--tokens", small_tokens, "--skip", "on", "--mlp", "none",
                                              "--layernorm", "none"]))
        cases.append(("small-rerun", [args.sanpath, "paths", "--effectiveness", "--rerun", "8", "--repeats", "3",
                                      "--model", folder, "--tokens", small_tokens]))  # as trained: MLP, LayerNorm
        # paths --enumerate --top: the branch-and-bound selection, then each selected term confirmed or enclosed
        cases.append(("small-top", [args.sanpath, "paths", "--enumerate", "--top", "10", "--model", folder,
                                    "--tokens", small_tokens, "--skip", "on", "--mlp", "none", "--layernorm",
                                    "none"]))
        if args.cases:
            wanted = args.cases.split(",")
            unknown = sorted(set(wanted) - {name for name, _ in cases})
            if unknown:
                sys.exit(f"cli_certified: unknown cases {unknown}; there are {[name for name, _ in cases]}")
            cases = [(name, cmd) for name, cmd in cases if name in wanted]
        results = []
        for name, cmd in cases:
            base = cmd + ["--format", "json", "-q"]
            times = {"confirmed": [], "certified": []}
            outs = {}
            for _ in range(args.rounds):
                for kind, check in (("confirmed", "auto"), ("certified", "certified")):
                    t, j = run(base + ["--check", check])
                    times[kind].append(t)
                    outs[kind] = j
            (vc, prec_c), (vp, prec_p) = values(outs["confirmed"]), values(outs["certified"])
            for (label, xc, dc), (_, xp, dp) in zip(vc, vp):
                d = min(dc or 0, dp or 0)
                if d and not agree(xc, xp, d):
                    sys.exit(f"cli_certified: {name} {label}: confirmed {xc} and certified {xp} disagree within "
                             f"{d} digits")
            r = {"case": name, "confirmed_s": statistics.median(times["confirmed"]),
                 "certified_s": statistics.median(times["certified"]),
                 "confirmed_precision": prec_c, "certified_precision": prec_p,
                 "confirmed_least_digits": min((d or 0) for _, _, d in vc),
                 "certified_least_digits": min((d or 0) for _, _, d in vp)}
            r["ratio"] = r["certified_s"] / r["confirmed_s"]
            results.append(r)
        if args.json:
            print(json.dumps(results, indent=1))
            return
        print(f"{'case':24} {'confirmed':>22} {'certified':>22} {'certified/confirmed':>20}  least digits")
        for r in results:
            print(f"{r['case']:24} {r['confirmed_s']:8.2f} s {r['confirmed_precision']:>11} "
                  f"{r['certified_s']:8.2f} s {r['certified_precision']:>11} {r['ratio']:20.2f}  "
                  f"{r['confirmed_least_digits']} confirmed, {r['certified_least_digits']} proven")


if __name__ == "__main__":
    main()
