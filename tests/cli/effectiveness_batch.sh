#!/usr/bin/env bash
# `paths --effectiveness [--rerun N]` on a batch of 16 token sequences of the
# real checkpoints (BERT classifier, GPT-2 LM head), as issue 14's "done means":
#  - the pooled agreement's denominator is the batch's number of predictions:
#    16 for the BERT classifier (one per sequence), Σ n_i for GPT-2 (one per
#    position), times the repetitions for a sampled re-run length;
#  - the pooled counts equal the sums of the inputs' own counts, the pooled KL
#    their prediction-weighted mean (recomputed here), and every KL is >= 0;
#  - each input's values in the JSON equal its own single-input run;
#  - the output is byte-identical with --threads 1 and 2, re-run included;
#  - --enumerate still refuses a batch.
# Fails when ../shared is missing and CI is set (skips otherwise).
#
# Usage: bash effectiveness_batch.sh <sanpath binary> <shared dir> <tmp dir>
set -uo pipefail
source "$(dirname "$0")/../support/cli.sh"
cli_workdir effectiveness_batch "$@"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
failed=0
ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }

if [ ! -d "$REAL/bert-ticket-classifier" ] || [ ! -d "$REAL/gpt2-capp" ]; then
  if [ -n "${CI:-}" ]; then
    echo "FAIL: $REAL is absent (CI is set)"
    exit 1
  fi
  echo "SKIP: $REAL is absent"
  exit 0
fi

# 16 sequences of 3..12 ids below each vocabulary (config.json: BERT 424, GPT-2 53).
vocab() { "$PY" -c "import json, sys; c = json.load(open(sys.argv[1])); print(c['vocab_size'])" "$1/config.json"; }
tokens() {
  "$PY" - "$1" "$2" <<'PY'
import random, sys
vocab, seed = int(sys.argv[1]), int(sys.argv[2])
r = random.Random(seed)
print("# 16 sequences for the effectiveness batch test")
for i in range(16):
    print(",".join(str(r.randrange(vocab)) for _ in range(r.randint(3, 12))))
PY
}
tokens "$(vocab "$REAL/bert-ticket-classifier")" 1 >"$T/bert.txt"
tokens "$(vocab "$REAL/gpt2-capp")" 2 >"$T/gpt2.txt"
[ "$(grep -vc '^#' "$T/bert.txt")" -eq 16 ] || fail "token file of BERT does not have 16 lines"

attn=(--skip on --mlp none --layernorm none)

# check_batch JSON TOKENFILE KIND REPEATS: the pooled counts and KL of every
# row against the inputs' own values (exact sense, and re-run when present).
check_batch() {
  "$PY" - "$@" <<'PY'
import json, sys
from decimal import Decimal, getcontext
getcontext().prec = 60
path, tokfile, kind, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
j = json.load(open(path))
lines = [l for l in open(tokfile).read().splitlines() if l.strip() and not l.startswith("#")]
lengths = [len(l.split(",")) for l in lines]
per_input = 1 if kind == "classifier" else None
want = [1] * 16 if kind == "classifier" else lengths
assert j["batch"] == 16, j["batch"]
assert j["head"]["kind"] == ("classifier" if kind == "classifier" else "language model"), j["head"]
assert j["head"]["predictions"] == sum(want), (j["head"]["predictions"], sum(want))
def num(s):
    return Decimal(s[2:]) if s.startswith("< ") else Decimal(s)
def check_pool(pool, agrees, kls, weights, what):
    assert pool["predictions"] == sum(weights), (what, pool["predictions"], sum(weights))
    assert pool["agree"] == sum(agrees), (what, pool["agree"], sum(agrees))
    assert 0 <= pool["agree"] <= pool["predictions"], what
    kl = num(pool["kl"])
    assert kl >= 0, (what, pool["kl"])
    if not pool["kl"].startswith("< ") and pool["kl_digits"]:
        w = sum(Decimal(k) * n for k, n in zip(kls, weights)) / sum(weights)
        # the printed strings carry at most 17 significant digits
        assert abs(w - kl) <= kl * max(Decimal(10) ** (1 - pool["kl_digits"]), Decimal("1e-15")), (what, w, kl)
rerun = "rerun" in j
for k, row in enumerate(j["effectiveness"]):
    exact = row["exact"] if rerun else row
    if exact is not None:
        rows = [i["effectiveness"][k]["exact"] if rerun else i["effectiveness"][k] for i in j["inputs"]]
        check_pool(exact["head"], [r["agree"] for r in rows], [r["kl"] for r in rows], want, f"exact k={k}")
        d = [num(r["distance"]) for r in rows]
        if not exact["distance"]["mean"].startswith("< "):
            m = sum(d) / len(d)
            assert abs(m - num(exact["distance"]["mean"])) <= m * Decimal("1e-15"), (k, m)
    if rerun:
        rows = [i["effectiveness"][k]["rerun"] for i in j["inputs"]]
        reps = 1 if row["all_paths"] else repeats
        for r in rows:
            assert len(r["agree"]) == reps, (k, r["agree"])
        check_pool(row["rerun"]["head"], [sum(r["agree"]) for r in rows], [r["kl"]["mean"] for r in rows],
                   [w * reps for w in want], f"re-run k={k}")
PY
}

# ---- exact sense on both checkpoints, per-input values = single runs -------
for m in bert gpt2; do
  model=$REAL/$([ $m = bert ] && echo bert-ticket-classifier || echo gpt2-capp)
  kind=$([ $m = bert ] && echo classifier || echo lm)
  for th in 1 2; do
    "$SANPATH" paths -q --model "$model" --tokens-file "$T/$m.txt" "${attn[@]}" --effectiveness --threads $th \
      --format json -o "$T/$m-eff$th.json" || fail "$m: paths --effectiveness --tokens-file exits non-zero"
  done
  if cmp -s "$T/$m-eff1.json" "$T/$m-eff2.json"; then ok "$m: byte-identical with --threads 1 and 2"; else fail "$m: --threads 1 and 2 differ"; fi
  if check_batch "$T/$m-eff1.json" "$T/$m.txt" $kind 1; then
    ok "$m: pooled agreement over $( [ $m = bert ] && echo 16 || echo 'Σ n_i') predictions, KL >= 0, weighted KL and mean distance"
  else
    fail "$m: pooled agreement / KL / distance statistics"
  fi
  # inputs 1 and 16 against their own single runs
  for i in 1 16; do
    line=$(grep -v '^#' "$T/$m.txt" | sed -n "${i}p")
    "$SANPATH" paths -q --model "$model" --tokens "$line" "${attn[@]}" --effectiveness --format json -o "$T/$m-one$i.json"
    if "$PY" - "$T/$m-eff1.json" "$T/$m-one$i.json" $((i - 1)) <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["inputs"][int(sys.argv[3])]
s = json.load(open(sys.argv[2]))
for d in (b, s):
    d.pop("input", None)
    d.pop("model", None)
sys.exit(0 if b == s else 1)
PY
    then ok "$m: input $i of the batch equals its single run"; else fail "$m: input $i differs from its single run"; fi
  done
done
"$SANPATH" paths -q --model "$REAL/bert-ticket-classifier" --tokens-file "$T/bert.txt" "${attn[@]}" --effectiveness \
  >"$T/bert.table" || fail "bert: table output"
grep -q '^task head: classifier (6 classes), 16 predictions' "$T/bert.table" && ok "bert: table names 16 predictions" ||
  fail "bert: table header: $(grep 'task head' "$T/bert.table")"

# CSV: one row per length k = 0..L, its pooled columns equal the JSON's
"$SANPATH" paths -q --model "$REAL/gpt2-capp" --tokens-file "$T/gpt2.txt" "${attn[@]}" --effectiveness --format csv \
  >"$T/gpt2.csv" || fail "gpt2: csv output"
if "$PY" - "$T/gpt2.csv" "$T/gpt2-eff1.json" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
j = json.load(open(sys.argv[2]))
assert [int(r["length"]) for r in rows] == list(range(len(j["effectiveness"]))), rows
for r, e in zip(rows, j["effectiveness"]):
    assert int(r["agree"]) == e["head"]["agree"] and int(r["predictions"]) == e["head"]["predictions"], (r, e)
    assert r["kl"] == e["head"]["kl"] and r["distance_mean"] == e["distance"]["mean"], (r, e)
PY
then ok "gpt2: CSV rows equal the JSON's pooled values"; else fail "gpt2: CSV differs from the JSON"; fi

# ---- re-run sense: BERT as configured (classifier), GPT-2 attention-only ----
"$SANPATH" paths -q --model "$REAL/bert-ticket-classifier" --tokens-file "$T/bert.txt" --effectiveness --rerun 4 \
  --repeats 2 --seed 3 --threads 2 --format json -o "$T/bert-rerun.json" || fail "bert: --rerun on a batch exits non-zero"
check_batch "$T/bert-rerun.json" "$T/bert.txt" classifier 2 && ok "bert re-run: pooled over inputs × repetitions" ||
  fail "bert re-run: pooled counts"
for th in 1 2; do
  "$SANPATH" paths -q --model "$REAL/gpt2-capp" --tokens-file "$T/gpt2.txt" "${attn[@]}" --effectiveness --rerun 2 \
    --repeats 2 --seed 3 --threads $th --format json -o "$T/gpt2-rerun$th.json" || fail "gpt2: --rerun exits non-zero"
done
cmp -s "$T/gpt2-rerun1.json" "$T/gpt2-rerun2.json" && ok "gpt2 re-run: byte-identical with --threads 1 and 2" ||
  fail "gpt2 re-run: --threads 1 and 2 differ"
check_batch "$T/gpt2-rerun1.json" "$T/gpt2.txt" lm 2 && ok "gpt2 re-run: both senses pooled over Σ n_i (× repetitions)" ||
  fail "gpt2 re-run: pooled counts"

# ---- refusals unchanged ----------------------------------------------------
"$SANPATH" paths -q --model "$REAL/gpt2-capp" --tokens-file "$T/gpt2.txt" "${attn[@]}" --enumerate >"$T/out" 2>"$T/err"
[ $? -ne 0 ] && grep -q 'a batch of 16 inputs' "$T/err" && ok "--enumerate refuses a batch" ||
  fail "--enumerate on a batch: $(cat "$T/err")"

[ $failed -eq 0 ] || { echo "$failed failure(s)"; exit 1; }
echo "all effectiveness batch checks passed"
