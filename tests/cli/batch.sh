#!/usr/bin/env bash
# Batches of inputs (--tokens-file, --input with X of shape [b, n, d],
# --random-input N --batch B) and `collapse --conventions paper`:
#  - the paper's four curves and their batch statistics equal an independent
#    numpy computation of the notebook's surgery (tests/reference/figure2_numpy.py),
#    and that check fails on the theory conventions' SAN (no LayerNorm);
#  - every input's values in a batch equal its own single-input run, and the
#    statistics equal mean / sample std / min / median / max recomputed here;
#  - the output is byte-identical with --threads 1 and 2;
#  - `paths --sums` and `bounds` on a batch: each input's JSON equals its own
#    single run, the statistics (and verdict counts) are recomputed here;
#  - a bad line of a token file is an error naming the file and the line, with
#    no output file; commands without batches refuse one.
# Needs no ../shared (models are made by `sanpath init`).
#
# Usage: bash batch.sh <sanpath binary> <shared dir> <tmp dir>
set -uo pipefail
source "$(dirname "$0")/../support/cli.sh"
cli_workdir batch "$@"
HERE=$(dirname "$(realpath "$0")")
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
failed=0
ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }

"$SANPATH" init --layout bert --out "$T/fig" --layers 2 --heads 2 --d-model 16 --std 0.3 --bias-std 0.1 --seed 5 \
  --vocab 40 >/dev/null || { echo "FAIL init"; exit 1; }

# ---- Figure 2 conventions against numpy ------------------------------------
"$PY" "$HERE/../reference/figure2_numpy.py" gen-input "$T/x3.safetensors" 3 6 16 7
"$SANPATH" collapse -q --model "$T/fig" --input "$T/x3.safetensors" --conventions paper --format json -o "$T/paper.json"
if "$PY" "$HERE/../reference/figure2_numpy.py" check "$T/fig" "$T/x3.safetensors" "$T/paper.json"; then
  ok "collapse --conventions paper = numpy surgery (every input, every statistic)"
else
  fail "collapse --conventions paper differs from the numpy surgery"
fi
# The check can fail: the theory conventions' SAN (no LayerNorm), relabelled
# as the paper's, must not pass.
"$SANPATH" collapse -q --model "$T/fig" --input "$T/x3.safetensors" --format json -o "$T/theory.json"
"$PY" - "$T/theory.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["conventions"] == "theory", j["conventions"]
j["conventions"] = "paper"
for v in j["variants"]:
    if v["name"] == "full":
        v["name"] = "transformer"
json.dump(j, open(sys.argv[1], "w"))
PY
if "$PY" "$HERE/../reference/figure2_numpy.py" check "$T/fig" "$T/x3.safetensors" "$T/theory.json" >"$T/theory.out"; then
  fail "the numpy check accepts the theory SAN as the paper's"
elif grep -q '^figure2: SAN input' "$T/theory.out" && ! grep -q 'SAN+skip input' "$T/theory.out"; then
  ok "the numpy check rejects the theory SAN (only the SAN curve differs)"
else
  fail "the numpy check rejects the theory run for an unexpected reason: $(head -3 "$T/theory.out")"
fi

# ---- a batch equals its single runs; statistics recomputed -----------------
printf '# three sequences of different lengths\n1,2,3,4\n\n5, 6,7,8,9,10,11\n12,13,14\n' >"$T/tokens.txt"
for th in 1 2; do
  "$SANPATH" forward -q --model "$T/fig" --tokens-file "$T/tokens.txt" --threads $th --format json -o "$T/fwd$th.json"
  "$SANPATH" collapse -q --model "$T/fig" --tokens-file "$T/tokens.txt" --conventions paper --threads $th \
    --format json -o "$T/col$th.json"
  "$SANPATH" collapse -q --model "$T/fig" --tokens-file "$T/tokens.txt" --conventions paper --threads $th \
    -o "$T/col$th.txt"
done
for f in fwd1.json col1.json col1.txt; do
  if cmp -s "$T/$f" "$T/${f/1/2}"; then ok "$f: byte-identical with --threads 1 and 2"; else fail "$f differs between --threads 1 and 2"; fi
done
"$SANPATH" forward -q --model "$T/fig" --tokens 1,2,3,4 --format json -o "$T/s0.json"
"$SANPATH" forward -q --model "$T/fig" --tokens 5,6,7,8,9,10,11 --format json -o "$T/s1.json"
"$SANPATH" forward -q --model "$T/fig" --tokens 12,13,14 --format json -o "$T/s2.json"
if "$PY" - "$T/fwd1.json" "$T/s0.json" "$T/s1.json" "$T/s2.json" <<'PY'
import json, statistics, sys
from fractions import Fraction
from decimal import Decimal
b = json.load(open(sys.argv[1]))
singles = [json.load(open(p)) for p in sys.argv[2:]]
bad = 0
assert b["batch"] == 3 and len(b["inputs"]) == 3
for i, (run, one) in enumerate(zip(b["inputs"], singles)):
    if run["layers"] != one["layers"] or run["precision_bits"] != one["precision_bits"]:
        print("input %d: batch values differ from its own run" % i); bad += 1
for l, layer in enumerate(b["layers"]):
    xs = [Fraction(Decimal(one["layers"][l]["relative_residual"])) for one in singles]
    mean = sum(xs) / len(xs)
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    ref = {"mean": float(mean), "stddev": float(var) ** 0.5, "min": float(min(xs)),
           "median": float(statistics.median(xs)), "max": float(max(xs))}
    for k, v in ref.items():
        got = float(layer["relative_residual"][k])
        if abs(got - v) > 1e-13 * abs(v):
            print("layer %d %s: %r, recomputed %r" % (l, k, got, v)); bad += 1
print("%d layers' statistics recomputed" % len(b["layers"]))
sys.exit(1 if bad else 0)
PY
then ok "forward batch: each input = its single run; mean, std, min, median, max recomputed"; else fail "forward batch statistics"; fi

# [b, n, d] input: each input equals the single run of its matrix.
"$SANPATH" forward -q --model "$T/fig" --input "$T/x3.safetensors" --format json -o "$T/xb.json"
"$PY" - "$T/x3.safetensors" "$T/x1.safetensors" <<'PY'
import json, struct, sys
src = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", src[:8])[0]
h = json.loads(src[8:8 + n])
b, rows, d = h["X"]["shape"]
data = src[8 + n:][: rows * d * 8]  # the first input
hdr = json.dumps({"X": {"dtype": "F64", "shape": [rows, d], "data_offsets": [0, len(data)]}}).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hdr)) + hdr + data)
PY
"$SANPATH" forward -q --model "$T/fig" --input "$T/x1.safetensors" --format json -o "$T/x1.json"
if "$PY" -c "import json,sys; a=json.load(open('$T/xb.json')); b=json.load(open('$T/x1.json')); sys.exit(a['inputs'][0]['layers'] != b['layers'])"; then
  ok "--input [b, n, d]: input 0 = the single run of X[0]"
else
  fail "--input [b, n, d]: input 0 differs from X[0] alone"
fi

# ---- bad inputs --------------------------------------------------------------
printf '1,2,3\n# fine\n4,5,oops\n' >"$T/bad.txt"
"$SANPATH" collapse -q --model "$T/fig" --tokens-file "$T/bad.txt" -o "$T/never.txt" >"$T/out" 2>"$T/err"
code=$?
if [ $code = 3 ] && grep -q "bad.txt: line 3: 'oops'" "$T/err" && [ "$(wc -l <"$T/err")" = 1 ] && [ ! -e "$T/never.txt" ] &&
  [ ! -s "$T/out" ]; then
  ok "bad token line: exit 3, names the file and line 3, no output: $(cat "$T/err")"
else
  fail "bad token line: exit $code, '$(cat "$T/err")'"
fi
printf '1,2,3\n\n4,,5\n' >"$T/bad2.txt"
"$SANPATH" forward -q --model "$T/fig" --tokens-file "$T/bad2.txt" >/dev/null 2>"$T/err"
if grep -q "bad2.txt: line 3: empty item" "$T/err"; then ok "empty item named with its line"; else fail "empty item: $(cat "$T/err")"; fi
printf '1,2\n99\n' >"$T/vocab.txt"
"$SANPATH" forward -q --model "$T/fig" --tokens-file "$T/vocab.txt" >/dev/null 2>"$T/err"
code=$?
if [ $code = 3 ] && grep -q "line 2" "$T/err"; then ok "token outside the vocabulary names line 2: $(cat "$T/err")"; else fail "out-of-vocabulary token: exit $code, $(cat "$T/err")"; fi
"$SANPATH" paths -q --model "$T/fig" --input "$T/x3.safetensors" --skip on --mlp none --layernorm none --enumerate \
  >/dev/null 2>"$T/err"
code=$?
if [ $code = 2 ] && grep -q "x3.safetensors: X: a batch of 3 inputs; paths analyses a batch with --sums or --effectiveness only" "$T/err"; then
  ok "paths --enumerate refuses a batch: $(cat "$T/err")"
else
  fail "paths --enumerate with a batch: exit $code, $(cat "$T/err")"
fi

# ---- paths --sums and bounds on a batch: each input = its own run ------------
attn=(--skip on --mlp none --layernorm none)
for th in 1 2; do
  "$SANPATH" paths -q --model "$T/fig" --tokens-file "$T/tokens.txt" "${attn[@]}" --sums --verify-decomposition --threads $th \
    --format json -o "$T/sums$th.json"
  "$SANPATH" paths -q --model "$T/fig" --tokens-file "$T/tokens.txt" "${attn[@]}" --sums --threads $th -o "$T/sums$th.txt"
  "$SANPATH" bounds -q --model "$T/fig" --tokens-file "$T/tokens.txt" --skip off --mlp none --layernorm none \
    --threads $th --format json -o "$T/bounds$th.json"
  "$SANPATH" bounds -q --model "$T/fig" --tokens-file "$T/tokens.txt" --skip off --mlp none --layernorm none \
    --threads $th -o "$T/bounds$th.txt"
done
for f in sums1.json sums1.txt bounds1.json bounds1.txt; do
  if cmp -s "$T/$f" "$T/${f/1/2}"; then ok "$f: byte-identical with --threads 1 and 2"; else fail "$f differs between --threads 1 and 2"; fi
done
i=0
for toks in 1,2,3,4 5,6,7,8,9,10,11 12,13,14; do
  "$SANPATH" paths -q --model "$T/fig" --tokens $toks "${attn[@]}" --sums --format json -o "$T/sums-s$i.json"
  "$SANPATH" bounds -q --model "$T/fig" --tokens $toks --skip off --mlp none --layernorm none --format json \
    -o "$T/bounds-s$i.json"
  i=$((i + 1))
done
if "$PY" - "$T" <<'PY'
import json, statistics, sys
from fractions import Fraction
from decimal import Decimal
T = sys.argv[1]
bad = 0
def stats_ok(where, got, xs):
    global bad
    mean = sum(xs) / len(xs)
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    ref = {"mean": float(mean), "stddev": float(var) ** 0.5, "min": float(min(xs)),
           "median": float(statistics.median(xs)), "max": float(max(xs))}
    for k, v in ref.items():
        if abs(float(got[k]) - v) > 1e-13 * abs(v):
            print("%s %s: %s, recomputed %r" % (where, k, got[k], v)); bad += 1
for kind, rows, value in (("sums", "lengths", lambda r, k: r["length_sums"][k]["share"]),
                          ("bounds", "depths", lambda r, k: r["r0"]["relative"] if k == 0 else r["depths"][k - 1]["measured"]["relative"])):
    b = json.load(open(f"{T}/{kind}1.json"))
    singles = [json.load(open(f"{T}/{kind}-s{i}.json")) for i in range(3)]
    assert b["batch"] == 3 and len(b["inputs"]) == 3
    for i, (run, one) in enumerate(zip(b["inputs"], singles)):
        one.pop("model")
        run.pop("input"); one.pop("input")
        if run != one:
            print("%s input %d: batch values differ from its own run" % (kind, i)); bad += 1
    for k, row in enumerate(b[rows]):
        key = "share" if kind == "sums" else "relative"
        stats_ok(f"{kind} {k}", row[key], [Fraction(Decimal(value(one, k))) for one in singles])
    if kind == "bounds":
        for row in b["depths"][1:]:
            l = row["layer"]
            want = sum(one["depths"][l - 1]["verdict"] == "HOLDS" for one in singles)
            if row["verdicts"]["HOLDS"] != want:
                print("bounds depth %d: %s HOLDS, singles %d" % (l, row["verdicts"], want)); bad += 1
print("statistics recomputed")
sys.exit(1 if bad else 0)
PY
then ok "paths --sums and bounds batches: each input = its single run; statistics and verdict counts recomputed"
else fail "paths --sums / bounds batch"; fi

# --random-input N --batch B: seeds SEED..SEED+B-1, input 1 = the single run with seed 4.
"$SANPATH" forward -q --model "$T/fig" --random-input 5 --seed 3 --batch 2 --format json -o "$T/rb.json"
"$SANPATH" forward -q --model "$T/fig" --random-input 5 --seed 4 --format json -o "$T/r4.json"
if "$PY" -c "import json,sys; a=json.load(open('$T/rb.json')); b=json.load(open('$T/r4.json')); sys.exit(a['inputs'][1]['layers'] != b['layers'])"; then
  ok "--batch 2 --seed 3: input 2 = the single run with seed 4"
else
  fail "--batch: input 2 differs from seed 4"
fi

"$SANPATH" forward -q --model "$T/fig" --random-input 5 --batch 0 >"$T/out" 2>"$T/err"
code=$?
if [ $code = 2 ] && grep -q -- "--batch: 0 inputs" "$T/err" && [ ! -s "$T/out" ]; then ok "--batch 0 is refused"; else fail "--batch 0: exit $code, $(cat "$T/err")"; fi

echo "$failed failed"
[ $failed = 0 ]
