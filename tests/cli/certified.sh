#!/usr/bin/env bash
# `sanpath forward --check certified` (math.md §10) end to end, against the
# independent mpmath reference (tests/reference/sanpath_ref.py check-forward):
# every printed number agrees with the reference to the digits it claims as
# proven, and every layer's "intervals" [lo, hi] contain the reference's exact
# value (computed at sanpath's bits + 128 and more). Also: printed digits =
# min(proven, asked), the table says "proven", and what certified runs do not
# cover yet is refused by name, with no output file.
# Usage: bash certified.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"

make_input x5 5 8 1
make_input x6 6 8 2
make_model san4.safetensors --layers 4 --heads 2 --d-model 8 --d-ff 0 --seed 5 --std 0.5 \
  --skip off --mlp none --layernorm none
make_model skip3.safetensors --layers 3 --heads 2 --d-model 8 --d-ff 0 --seed 6 --std 0.5 \
  --skip on --mlp none --layernorm none --mask causal
make_model full.safetensors --layers 2 --heads 2 --d-model 8 --seed 7 --std 0.3

# (a) the reference's check of every printed digit and interval; auto rises until the digits asked are proven
PRECISIONS="auto 257" forward_case san4 "$WORK/san4.safetensors" input "$WORK/x5" --check certified
PRECISIONS="auto" forward_case skip3-30-digits "$WORK/skip3.safetensors" input "$WORK/x6" --check certified --digits 30
PRECISIONS="65" forward_case san4-65-bits "$WORK/san4.safetensors" input "$WORK/x6" --check certified
# double proven after the fact: the double values, each with the digits an enclosed run proves
PRECISIONS="double" forward_case san4-double "$WORK/san4.safetensors" input "$WORK/x5" --check certified
# a whole transformer block: skip, MLP (gelu), LayerNorm post
PRECISIONS="auto 128" forward_case full "$WORK/full.safetensors" input "$WORK/x5" --check certified \
  --skip on --mlp residual --layernorm post

# a tier whose balls grow too wide to bound a LayerNorm variance away from 0 proves nothing: auto, and the
# enclosure of a double run, go a tier up; with the ceiling at that tier the run ends with that one-line error
make_model wide.safetensors --layers 2 --heads 2 --d-model 8 --d-ff 16 --seed 5 --std 1e12 \
  --skip on --mlp residual --layernorm post
PRECISIONS="auto double" forward_case wide "$WORK/wide.safetensors" input "$WORK/x5" --check certified --digits 3
CASES=$((CASES + 1))
"$REF_PY" -c "import json, sys
a, d = (json.load(open(f)) for f in sys.argv[1:])
assert a['tried_bits'][-2:] == [128, 257] and a['precision_bits'] == 257, (a['tried_bits'], a['precision_bits'])
assert d['check_precision_bits'] == 257, d['check_precision_bits']" "$WORK/wide.auto.json" "$WORK/wide.double.json" ||
  fail "wide: 128 bits void, 257 tried next"
CASES=$((CASES + 1))
"$SANPATH" forward --model "$WORK/wide.safetensors" --input "$WORK/x5" --check certified --digits 3 --max-bits 128 \
  -q -o "$WORK/void.json" 2>"$WORK/void.err"
rc=$?
if [ "$rc" -ne 4 ] || [ -e "$WORK/void.json" ] || [ "$(wc -l <"$WORK/void.err")" -ne 1 ] ||
  ! grep -q "a LayerNorm variance + eps is not bounded away from 0 at 128 bits" "$WORK/void.err"; then
  fail "wide --max-bits 128: exit $rc (want 4, one line, no output file): $(cat "$WORK/void.err")"
fi

# the two passes: auto runs the centred pass (math.md §7 in ball arithmetic), --method direct the direct one;
# deep collapsing models with an MLP (relu, gelu_tanh) and LayerNorm, causal or not
PRECISIONS="auto" forward_case san4-direct "$WORK/san4.safetensors" input "$WORK/x5" --check certified --method direct
PRECISIONS="128 auto" forward_case san4-centred "$WORK/san4.safetensors" input "$WORK/x5" --check certified \
  --method centred
for act in relu gelu_tanh; do
  make_model "deep-$act.safetensors" --layers 6 --heads 2 --d-model 8 --d-ff 16 --seed 11 --std 0.6 \
    --activation "$act" &&
    PRECISIONS="auto" forward_case "deep-mlp-$act" "$WORK/deep-$act.safetensors" input "$WORK/x6" \
      --check certified --skip off --mlp residual --layernorm post
done
PRECISIONS="auto" forward_case deep-causal-pre "$WORK/deep-relu.safetensors" input "$WORK/x5" --check certified \
  --skip off --mlp plain --layernorm pre --mask causal

# the optimal centre (math.md §3): the norms at the best centre and the lower end enclosed, each checked
# against what the reference knows of the true minimum; the centred and the direct pass
PRECISIONS="auto" forward_case san4-optimal "$WORK/san4.safetensors" input "$WORK/x5" --check certified \
  --center optimal
PRECISIONS="257" forward_case san4-optimal-direct "$WORK/san4.safetensors" input "$WORK/x6" --check certified \
  --center optimal --method direct

# bounds --check certified: HOLDS and VIOLATED proven (verdicts_proven, each depth's verdict_proven), none
# contradicting the reference's facts on r_0 and r_l; a gamma so small that the bound falls below the
# measured residuals makes them VIOLATED, proven; a fixed 65-bit direct pass leaves deep layers UNDECIDED
PRECISIONS="auto" bounds_case san4-bounds "$WORK/san4.safetensors" input "$WORK/x5" --check certified
PRECISIONS="auto" bounds_case san4-bounds-violated "$WORK/san4.safetensors" input "$WORK/x5" --check certified \
  --gamma 1e-30
CASES=$((CASES + 1))
"$SANPATH" bounds --model "$WORK/san4.safetensors" --input "$WORK/x5" --check certified --gamma 1e-30 \
  --precision 65 --method direct --format json -q -o "$WORK/undecided.json" 2>"$WORK/undecided.err" ||
  fail "bounds --check certified --precision 65 exited non-zero: $(cat "$WORK/undecided.err")"
"$REF_PY" - "$WORK/undecided.json" <<'PYEOF' || fail "bounds at 65 bits: expected proven VIOLATED and UNDECIDED depths"
import json, sys
j = json.load(open(sys.argv[1]))
v = [(d["verdict"], d["verdict_proven"]) for d in j["depths"]]
assert j["verdicts_proven"] is True, j["verdicts_proven"]
assert ("VIOLATED", True) in v and ("UNDECIDED", False) in v, v
assert all(p == (x in ("HOLDS", "VIOLATED")) for x, p in v), v
PYEOF
table=$("$SANPATH" bounds --model "$WORK/san4.safetensors" --input "$WORK/x5" --check certified 2>&1) ||
  fail "bounds --check certified (table) exited non-zero: $table"
grep -q "HOLDS and VIOLATED are proven" <<<"$table" || fail "the bounds table does not say its verdicts are proven: $table"
refused_bounds=$("$SANPATH" bounds --model "$WORK/san4.safetensors" --input "$WORK/x5" --check rounding \
  --precision double 2>&1)
[ $? -eq 2 ] && grep -q "optimal centre" <<<"$refused_bounds" ||
  fail "bounds --check rounding: expected a usage error naming the optimal centre, got: $refused_bounds"

# token ids through the embeddings (LayerNorm of word + position + type; GPT-2's wte + wpe)
make_model bert --layout bert --layers 2 --heads 2 --d-model 8 --vocab 30 --seed 8 --std 0.3 &&
  PRECISIONS="auto 128" forward_case bert-tokens "$WORK/bert" tokens 3,1,4,1,5,9 --check certified
# paths --sums --check certified: every length's norms and share proven, ‖X^L‖_F too, and Theorem 2.1's
# reconstruction error bounded by its enclosure, whose exact value is 0 (the reference checks all of them)
PRECISIONS="auto 128" paths_case san4-sums "$WORK/san4.safetensors" input "$WORK/x5" --sums --check certified
PRECISIONS="257" paths_case skip3-sums "$WORK/skip3.safetensors" input "$WORK/x6" --sums --check certified
CASES=$((CASES + 1))
sums=$("$SANPATH" paths --model "$WORK/skip3.safetensors" --input "$WORK/x6" --sums --check certified 2>&1) ||
  fail "paths --sums --check certified (table) exited non-zero: $sums"
grep -q "digits proven" <<<"$sums" && grep -q "holds, proven" <<<"$sums" ||
  fail "the length sums table does not say its digits and Theorem 2.1 are proven: $sums"
# paths --enumerate --check certified: every path's four norms proven (the reference checks each interval); with
# every path walked, Theorem 2.1's error enclosed as well; --top's paths chosen at the starting tier, then proven
PRECISIONS="auto 128" paths_case san4-enumerate "$WORK/san4.safetensors" input "$WORK/x5" --enumerate --check certified
PRECISIONS="auto" paths_case skip3-top "$WORK/skip3.safetensors" input "$WORK/x6" --enumerate --top 4 --check certified
PRECISIONS="auto" paths_case skip3-length "$WORK/skip3.safetensors" input "$WORK/x6" --enumerate --length 2 \
  --check certified
CASES=$((CASES + 1))
top=$("$SANPATH" paths --model "$WORK/skip3.safetensors" --input "$WORK/x6" --enumerate --top 4 --check certified 2>&1) ||
  fail "paths --enumerate --top 4 --check certified (table) exited non-zero: $top"
grep -q "digits proven" <<<"$top" && grep -q "selected at 2[0-9]* bits, their values proven" <<<"$top" ||
  fail "the top-K table does not say its digits are proven and where the paths were selected: $top"
CASES=$((CASES + 1))
all=$("$SANPATH" paths --model "$WORK/skip3.safetensors" --input "$WORK/x6" --enumerate --check certified 2>&1) ||
  fail "paths --enumerate --check certified (table) exited non-zero: $all"
grep -q "holds, proven" <<<"$all" || fail "the enumeration table does not say Theorem 2.1 is proven: $all"
# paths --effectiveness --check certified: the table says its digits are proven, with --rerun too (the
# re-run sub-networks in balls: each repetition's enclosures in JSON); in double it is refused (below)
CASES=$((CASES + 1))
eff=$("$SANPATH" paths --model "$WORK/skip3.safetensors" --input "$WORK/x6" --effectiveness --check certified 2>&1) ||
  fail "paths --effectiveness --check certified (table) exited non-zero: $eff"
grep -q "digits proven" <<<"$eff" || fail "the effectiveness table does not say its digits are proven: $eff"
CASES=$((CASES + 1))
rr=$("$SANPATH" paths --model "$WORK/skip3.safetensors" --input "$WORK/x6" --effectiveness --rerun 3 --repeats 2 \
  --check certified 2>&1) || fail "paths --effectiveness --rerun 3 --check certified (table) exited non-zero: $rr"
grep -q "digits proven" <<<"$rr" && grep -q "digits of the mean printed, from each repetition's proven digits" <<<"$rr" ||
  fail "the re-run table does not say its digits are proven: $rr"
"$SANPATH" paths --model "$WORK/skip3.safetensors" --input "$WORK/x6" --effectiveness --rerun 3 --repeats 2 \
  --check certified --format json -q -o "$WORK/rerun.json" || fail "paths --rerun --check certified (JSON) failed"
"$REF_PY" -c "import json, sys
j = json.load(open('$WORK/rerun.json'))
rows = [e['rerun'] for e in j['effectiveness']]
ok = j['check_method'] == 'certified' and all(len(r['intervals']['distance']) >= 1 for r in rows) and \
    all(len(r['intervals']['distance']) == 2 for e, r in zip(j['effectiveness'], rows) if not e['all_paths'])
sys.exit(0 if ok else 1)" || fail "the certified re-run JSON lacks a distance interval per repetition"
# over a batch: each input proven, and the table's precision line says so
for mode in --sums --effectiveness "--effectiveness --rerun 2 --repeats 2"; do
  CASES=$((CASES + 1))
  # shellcheck disable=SC2086
  batch=$("$SANPATH" paths --model "$WORK/skip3.safetensors" --random-input 5 --batch 3 $mode --check certified 2>&1) ||
    fail "paths $mode --batch 3 --check certified exited non-zero: $batch"
  grep -q "digits proven per input: every value enclosed by ball arithmetic" <<<"$batch" ||
    fail "paths $mode --batch 3 --check certified does not say each input's digits are proven: $batch"
  if [[ $mode == *--rerun* ]] && ! grep -q "digits of the mean printed, from each input's proven digits" <<<"$batch"; then
    fail "paths $mode --batch 3 --check certified: the re-run cells do not say where their digits come from: $batch"
  fi
done
for bad in "--sample 4 --check certified" "--enumerate --check certified --precision double" \
  "--sums --check certified --precision double" "--sums --check rounding" "--sums --check" \
  "--effectiveness --rerun 2 --check certified --precision double" "--effectiveness --check certified --precision double"; do
  CASES=$((CASES + 1))
  rm -f "$WORK/refused.json"
  # shellcheck disable=SC2086
  out=$("$SANPATH" paths --model "$WORK/skip3.safetensors" --input "$WORK/x6" $bad -o "$WORK/refused.json" 2>&1)
  rc=$?
  if [ $rc -eq 0 ] || [ -e "$WORK/refused.json" ] || [ "$(wc -l <<<"$out")" -ne 1 ]; then
    fail "paths $bad: expected a one-line refusal, a non-zero exit and no file; got rc $rc: $out"
  fi
done

# the real checkpoints as trained: at least the 20 digits asked proven at every layer, no ceiling
real=$(real_models_dir)
if [ -z "$real" ]; then
  echo "SKIP real checkpoints: $SHARED/data/real-models is absent"
else
  PRECISIONS="auto" forward_case bert-real "$real/bert-ticket-classifier" tokens 2,15,27,3,40 --check certified
  PRECISIONS="auto" forward_case gpt2-real "$real/gpt2-capp" tokens 1,5,9,13,20 --check certified
  PRECISIONS="double" forward_case bert-real-double "$real/bert-ticket-classifier" tokens 2,15,27,3,40 \
    --check certified
  for j in "$WORK/bert-real.auto.json" "$WORK/gpt2-real.auto.json"; do
    CASES=$((CASES + 1))
    "$REF_PY" -c "import json, sys; j = json.load(open(sys.argv[1])); \
assert not j['ceiling_reached'] and min(r['digits'] for r in j['layers']) >= 20, [r['digits'] for r in j['layers']]" \
      "$j" || fail "$j: 20 proven digits at every layer"
  done
fi

# (b) the JSON: check_method, an interval per quantity, each value printed with every proven digit
CASES=$((CASES + 1))
"$SANPATH" forward --model "$WORK/san4.safetensors" --input "$WORK/x5" --check certified --digits 30 --format json \
  -q -o "$WORK/c30.json" 2>"$WORK/c30.err" || fail "forward --check certified --digits 30: $(cat "$WORK/c30.err")"
if ! "$REF_PY" - "$WORK/c30.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["check_method"] == "certified", j["check_method"]
assert j["check_precision_bits"] is None
for rec in j["layers"]:
    dq = rec["digits_by_quantity"]
    assert rec["digits"] == min(dq.values()), rec
    iv = rec["intervals"]
    assert set(iv) == set(dq), (sorted(iv), sorted(dq))
    v = rec["relative_residual"]
    if v.startswith("<"):
        assert dq["relative_residual"] == 0, rec
        continue
    mant = v.split("e")[0].lstrip("-").replace(".", "")
    assert len(mant) == dq["relative_residual"], (v, dq["relative_residual"])  # every proven digit
assert min(r["digits"] for r in j["layers"]) >= 30, "auto at --digits 30 proves 30 digits everywhere"
EOF
then
  fail "certified JSON (intervals, every proven digit printed)"
fi

# (c) the table states that the digits are proven
CASES=$((CASES + 1))
table=$("$SANPATH" forward --model "$WORK/san4.safetensors" --input "$WORK/x5" --check certified 2>&1) ||
  fail "forward --check certified (table) exited non-zero: $table"
grep -q "digits proven" <<<"$table" || fail "the table does not say the digits are proven: $table"

# a batch of token sequences: each input proven, and said so
CASES=$((CASES + 1))
printf '3,1,4,1\n5,9,2,6,5\n' >"$WORK/tokens.txt"
batch=$("$SANPATH" forward --model "$WORK/bert" --tokens-file "$WORK/tokens.txt" --check certified 2>&1) ||
  fail "forward --tokens-file --check certified exited non-zero: $batch"
grep -q "digits proven per input" <<<"$batch" || fail "a certified batch does not say its digits are proven: $batch"

# (d) what is not enclosed yet is refused by name, exit code 2 (usage) or 1, and no output file
refused() {  # refused NAME EXPECTED-TEXT sanpath-forward-args...
  local name=$1 text=$2
  shift 2
  CASES=$((CASES + 1))
  rm -f "$WORK/refused.json"
  local out rc
  out=$("$SANPATH" forward --check certified --format json -o "$WORK/refused.json" "$@" 2>&1)
  rc=$?
  if [ $rc -eq 0 ] || ! grep -qF -- "$text" <<<"$out" || [ -e "$WORK/refused.json" ] || [ "$(wc -l <<<"$out")" -ne 1 ]; then
    fail "$name: expected one line naming '$text', a non-zero exit and no file; got rc $rc: $out"
  fi
}
refused median "the median centre" --model "$WORK/san4.safetensors" --input "$WORK/x5" --center median
refused measures "--measures" --model "$WORK/san4.safetensors" --input "$WORK/x5" --measures mu

# collapse --check certified: the README's Figure-2 table with proven digits. No reference reaches 1e-1113622
# (3.7 million bits), so the enclosures are checked against the confirmed run (centred runs at 128 and 257
# bits): the same values to the digits both print, every interval containing the confirmed value, 20 digits
# proven everywhere.
CASES=$((CASES + 1))
if "$SANPATH" collapse --check certified --format json -q -o "$WORK/collapse.certified.json" 2>"$WORK/cc.err" &&
  "$SANPATH" collapse --format json -q -o "$WORK/collapse.confirmed.json" 2>>"$WORK/cc.err"; then
  "$REF_PY" - "$WORK/collapse.certified.json" "$WORK/collapse.confirmed.json" <<'EOF' || fail "collapse --check certified"
import json, sys
from decimal import Decimal, getcontext
getcontext().prec = 200
getcontext().Emin, getcontext().Emax = -999999999, 999999999
c, k = (json.load(open(f)) for f in sys.argv[1:3])
assert [v["name"] for v in c["variants"]] == [v["name"] for v in k["variants"]]
cells = 0
for vc, vk in zip(c["variants"], k["variants"]):
    assert vc["check_method"] == "certified" and vc["method"] == "centred" and not vc["ceiling_reached"], vc["name"]
    for lc, lk in zip(vc["layers"], vk["layers"]):
        where = (vc["name"], lc["layer"])
        assert lc["digits"] >= 20 and lk["digits"] >= 20, (where, lc["digits"], lk["digits"])
        # the same value to the digits both print (every proven, every confirmed one)
        dc, dk = lc["digits_by_quantity"]["relative_residual"], lk["digits_by_quantity"]["relative_residual"]
        a, b = Decimal(lc["relative_residual"]), Decimal(lk["relative_residual"])
        assert abs(a - b) <= Decimal(10) ** (b.adjusted() - min(dc, dk) + 1), (where, str(a), str(b))
        # the confirmed value, 20 digits, is within one unit of its last digit of every point of [lo, hi]
        lo, hi = (Decimal(x) for x in lc["intervals"]["relative_residual"])
        v = Decimal(lk["relative_residual"])
        unit = Decimal(10) ** (v.adjusted() - 19)
        assert lo <= hi and v - unit <= lo and hi <= v + unit, (where, str(lo), str(hi), str(v))
        cells += 1
assert cells == 4 * 13, cells
EOF
else
  fail "collapse --check certified: $(cat "$WORK/cc.err")"
fi
CASES=$((CASES + 1))
table=$("$SANPATH" collapse --check certified 2>&1)
grep -q "each proven by ball arithmetic" <<<"$table" || fail "the collapse table does not say proven: $table"

ref_finish
