#!/usr/bin/env bash
# sanpath forward/collapse --measures (math.md §9, docs/math.md §8): every
# layer's measures in JSON ("measures" object, digits in digits_by_quantity,
# the attention ones from layer 1 on), one table column (forward) or one table
# (collapse) per measure, CSV columns, batch statistics, the double pass,
# collapsed layers of the embedded default whose companions keep >= 15
# confirmed digits at exponents in the thousands, and refusals (exit 2, one
# line naming --measures), saturated attention below MPFR's exponent range
# (never 0). The values themselves are checked against the
# mpmath reference in reference_measures.sh and tests/compute/test_measures.cpp.
# Usage: bash measures.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks measures "$@"

SAN="$dir/san.safetensors"
expect 0 "$SANPATH" init --out "$SAN" --layers 3 --heads 2 --d-model 8 --skip off --mlp none --layernorm none --seed 4
expect 0 "$SANPATH" forward --model "$SAN" --random-input 6 --seed 1 --measures all --quiet --format json
check "forward --measures all: every measure, confirmed" '
names = ["mu", "svd_residual", "cosine", "one_minus_cosine", "stable_rank", "stable_rank_minus_one",
         "effective_rank", "effective_rank_minus_one"]
att = ["attention_entropy", "first_token_mass"]
for L in j["layers"]:
    want = names + (att if L["layer"] > 0 else [])
    assert list(L["measures"]) == want, (L["layer"], list(L["measures"]))
    for k in want:
        assert L["digits_by_quantity"][k] >= 15, (L["layer"], k, L["digits_by_quantity"])
        assert not L["measures"][k].startswith("<"), (k, L["measures"][k])
    assert L["digits"] <= min(L["digits_by_quantity"][k] for k in want)
    m = L["measures"]
    assert abs(num(m["cosine"]) + num(m["one_minus_cosine"]) - 1) < 1e-12, m
    assert abs(num(m["stable_rank"]) - 1 - num(m["stable_rank_minus_one"])) < 1e-12, m
    assert 1 <= num(m["effective_rank"]) <= 6 and 1 <= num(m["stable_rank"]) <= num(m["effective_rank"]) + 1e-9, m
    if L["layer"] > 0:
        assert 0 < num(m["attention_entropy"]) <= math.log(6) + 1e-12 and 0 < num(m["first_token_mass"]) < 1, m'
expect 0 "$SANPATH" forward --model "$SAN" --random-input 6 --seed 1 --measures mu,cosine --quiet --format json
check "forward --measures mu,cosine: those only" '
for L in j["layers"]:
    assert list(L["measures"]) == ["mu", "cosine", "one_minus_cosine"], L["measures"]'
expect 0 "$SANPATH" forward --model "$SAN" --random-input 6 --seed 1 --quiet --format json
check "forward without --measures: no measures object" '
assert all("measures" not in L and "mu" not in L["digits_by_quantity"] for L in j["layers"])'

expect 0 "$SANPATH" forward --model "$SAN" --random-input 6 --seed 1 --measures all --quiet
grep -q "measures (math.md §9); in brackets the digits printed, each confirmed (at most --digits; all in --format json):" "$dir/out" || fail "forward table: the measures table"
head_line=$(grep -A1 "measures (math.md §9)" "$dir/out" | tail -1)
for n in mu svd_residual one_minus_cosine stable_rank_minus_one effective_rank_minus_one attention_entropy first_token_mass; do
  case "$head_line" in *"$n"*) ;; *) fail "forward table: no column $n in: $head_line" ;; esac
done
expect 0 "$SANPATH" forward --model "$SAN" --random-input 6 --seed 1 --measures mu,first_token_mass --quiet --format csv
head -1 "$dir/out" | grep -qx "layer,residual_composite,residual_one,residual_inf,residual_frobenius,norm_composite,norm_frobenius,relative_residual,mu,first_token_mass,digits" ||
  fail "forward csv: header $(head -1 "$dir/out")"
[ "$(sed -n 2p "$dir/out" | awk -F, '{print $10}')" = "" ] || fail "forward csv: layer 0 has a first_token_mass"

# The double pass: measures confirmed by the rounding check.
expect 0 "$SANPATH" forward --model "$SAN" --random-input 6 --seed 1 --precision double --measures all --quiet --format json
check "forward --precision double --measures all" '
# Layers 0 and 1 are far above double rounding; layers 2 and 3 (1e-16,
# 1e-60) are below it: their tiny measures are bounds with 0 digits.
for L in j["layers"][:2]:
    for k, d in L["digits_by_quantity"].items():
        assert d is not None and d >= 8, (L["layer"], k, d)
for L in j["layers"][2:]:
    for k in ["mu", "svd_residual", "one_minus_cosine", "stable_rank_minus_one", "effective_rank_minus_one"]:
        assert L["measures"][k].startswith("< ") and L["digits_by_quantity"][k] == 0, (L["layer"], k, L["measures"])'

# Deep collapse: the embedded default (12 layers); the SAN reaches residuals
# far below 1e-1000 and its measures keep their digits there.
expect 0 "$SANPATH" collapse --measures all --quiet --format json
check "collapse --measures all: the SAN at depth" '
san = [v for v in j["variants"] if v["name"] == "SAN"][0]
last = san["layers"][-1]
for k in ["mu", "svd_residual", "one_minus_cosine", "stable_rank_minus_one", "effective_rank_minus_one"]:
    v = last["measures"][k]
    assert not v.startswith("<") and int(v.split("e")[1]) < -1000, (k, v)
    assert last["digits_by_quantity"][k] >= 15, (k, last["digits_by_quantity"])
assert last["measures"]["cosine"].startswith("1.0000000000"), last["measures"]["cosine"]
for v in j["variants"]:
    assert all("measures" in L for L in v["layers"]), v["name"]'
expect 0 "$SANPATH" collapse --measures mu --quiet
grep -q "^mu (math.md §9) per layer" "$dir/out" || fail "collapse table: no mu table"

# A batch: mean ± std of every measure per layer.
expect 0 "$SANPATH" forward --model "$SAN" --random-input 6 --batch 3 --seed 1 --measures mu,attention_entropy --quiet --format json
check "forward batch --measures: statistics per layer" '
for L in j["layers"]:
    m = L["measures"]
    assert "mu" in m and m["mu"]["mean"] and m["mu"]["stddev"], m
    assert ("attention_entropy" in m) == (L["layer"] > 0), m
for run in j["inputs"]:
    assert all("measures" in L for L in run["layers"])'
expect 0 "$SANPATH" forward --model "$SAN" --random-input 6 --batch 3 --seed 1 --measures mu --quiet --format csv
head -1 "$dir/out" | grep -qx "quantity,layer,mean,stddev,min,median,max,digits" || fail "batch csv header"
grep -q "^mu,3," "$dir/out" || fail "batch csv: no mu row of layer 3"
expect 0 "$SANPATH" collapse --random-input 6 --batch 2 --seed 1 --measures cosine --quiet
grep -q "^one_minus_cosine (math.md §9) per layer, mean ± std" "$dir/out" || fail "collapse batch table"

# The HTML report: one chart per measure; a batch draws bands.
expect 0 "$SANPATH" report --model "$SAN" --random-input 6 --seed 1 --measures mu,first_token_mass --out "$dir/r.html" --quiet
for n in mu first_token_mass; do
  grep -q "id=\"chart-measure-$n\"" "$dir/r.html" || fail "report: no chart of $n"
done
grep -q 'id="chart-measure-cosine"' "$dir/r.html" && fail "report: a chart of a measure not asked for"
# Figure 2's conventions take measures too.
expect 0 "$SANPATH" collapse --model "$SAN" --random-input 6 --seed 1 --conventions paper --measures cosine --quiet --format json
check "collapse --conventions paper --measures cosine" '
assert j["conventions"] == "paper"
for v in j["variants"]:
    assert all("one_minus_cosine" in L["measures"] for L in v["layers"]), v["name"]'

# Saturated attention: a GPT-NeoX SAN at weight scale 1 whose attention
# weights fall below MPFR's default exponent range by layer 6 (entropy
# 2.0e-7019259673) and below its widest (2^(1-2^62), about 1e-1388255822130839282)
# at layers 11 and 12. A softmax row over two keys or more has a positive
# entropy, so never "0": there a bound "< 1e-N" above what underflow took, no
# digit confirmed. Every other value: the direct and the centred pass at 128
# bits and a centred pass at 1,025 bits agree on every digit they print.
SAT="$dir/saturated"
expect 0 "$SANPATH" init --out "$SAT" --layout gpt_neox --layers 12 --heads 2 --d-model 16 --d-ff 32 --seed 7 \
  --dtype F32 --std 1.0 --vocab 64
for run in direct:128 centred:128 centred:1025; do
  expect 0 "$SANPATH" forward --model "$SAT" --tokens 3,17,42,8,29,51,11,60 --skip off --mlp none --layernorm none \
    --measures attention_entropy,first_token_mass --method "${run%:*}" --precision "${run#*:}" --quiet --format json
  cp "$dir/out" "$dir/saturated-${run%:*}-${run#*:}.json"
done
check "saturated attention: no 0, bounds where underflow took all, the same digits" '
from decimal import Decimal
def split(s):  # mantissa, exponent: past Decimal'"'"'s exponent range
    m, e = s.split("e")
    return Decimal(m), int(e)
runs = [json.load(open("'"$dir"'/saturated-" + r + ".json"))["layers"] for r in ("direct-128", "centred-128", "centred-1025")]
for k in ("attention_entropy", "first_token_mass"):
    for layer in range(1, 13):
        got = [(L[layer]["measures"][k], L[layer]["digits_by_quantity"][k]) for L in runs]
        for v, d in got:
            assert v != "0" and not v.startswith("-"), (k, layer, got)
        if k == "attention_entropy" and layer >= 11:
            for v, d in got:
                assert v.startswith("< 1e-") and int(v[5:]) >= 1388255822130839000 and d == 0, (layer, got)
            continue
        assert layer != 10 or k != "attention_entropy" or split(got[0][0])[1] == -1322503662643599944, got
        for v, d in got:
            assert not v.startswith("<") and d >= 15, (k, layer, got)
        (m0, e0), (m1, e1), (m2, e2) = (split(v) for v, _ in got)
        assert e0 == e1 == e2, (k, layer, got)
        digits = min(d for _, d in got[:2])
        assert abs(m0 - m2) <= Decimal(10) ** (1 - digits) and abs(m1 - m2) <= Decimal(10) ** (1 - digits), (k, layer, got)'

# Refusals: exit 2, one line naming --measures, no output file.
expect 2 "$SANPATH" forward --model "$SAN" --random-input 6 --measures mu,rank --output "$dir/never.json"
grep -q "^sanpath: error: --measures: measures: 'rank' is not one of mu, svd_residual" "$dir/err" || fail "bad name: $(cat "$dir/err")"
[ "$(wc -l < "$dir/err")" -eq 1 ] || fail "bad name: more than one line"
[ ! -e "$dir/never.json" ] || fail "bad name: an output file"
expect 2 "$SANPATH" collapse --measures "" --quiet
"$SANPATH" forward --help | grep -q -- "--measures" || fail "forward --help: no --measures"

[ "$fails" -eq 0 ] && echo "measures: all passed"
exit "$fails"
