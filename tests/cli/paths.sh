#!/usr/bin/env bash
# sanpath paths: the JSON of --sums, --enumerate and --sample on models made
# with `sanpath init`, counts against Python's math.comb, exit codes of the
# refusals, --check, and (when present) the real GPT-2 checkpoint.
# Usage: bash paths.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks paths "$@"

# An attention-only model with skip (L = 3, H = 2) and one without; a full one.
san="$dir/san.safetensors"
nos="$dir/noskip.safetensors"
full="$dir/full.safetensors"
expect 0 "$SANPATH" init --out "$san" --layers 3 --heads 2 --d-model 8 --std 0.4 --bias-std 0.2 --seed 3 \
  --skip on --mlp none --layernorm none --d-ff 0
expect 0 "$SANPATH" init --out "$nos" --layers 4 --heads 3 --d-model 12 --std 0.4 --bias-std 0.2 --seed 4 \
  --skip off --mlp none --layernorm none --d-ff 0
expect 0 "$SANPATH" init --out "$full" --layers 2 --heads 2 --d-model 8 --seed 5
IN=(--random-input 5 --seed 7)

# --sums: counts C(L,k)·H^k, the issue's fields, decomposition error at 257 bits < 2^-240.
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --sums --precision 257 --format json
check "sums JSON (skip on)" '
rows = j["length_sums"]
assert [r["length"] for r in rows] == [0, 1, 2, 3]
for r in rows:
    assert r["count"] == str(math.comb(3, r["length"]) * 2 ** r["length"]), r
    assert num(r["norm"]["frobenius"]) > 0 and num(r["residual"]["composite"]) > 0 and num(r["share"]) > 0
    assert r["digits"] >= 30, r
assert num(j["decomposition_error"]) < 2.0 ** -240, j["decomposition_error"]
assert j["precision_bits"] == 257 and j["check_precision_bits"] == 513
assert j["total_paths"] == "27"'
expect 0 "$SANPATH" paths --model "$nos" "${IN[@]}" --sums --format json
check "sums JSON (skip off)" '
counts = [r["count"] for r in j["length_sums"]]
assert counts == ["0", "0", "0", "0", str(3 ** 4)], counts
assert j["length_sums"][0]["norm"]["frobenius"] == "0"
assert num(j["length_sums"][4]["norm"]["frobenius"]) > 0
assert j["precision_bits"] >= 128'
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --sums --format csv
head -1 "$dir/out" | grep -q "^length,count,frobenius,residual_composite,share,digits$" || fail "sums CSV header"
[ "$(wc -l <"$dir/out")" -eq 5 ] || fail "sums CSV rows"
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --sums --verify-decomposition
grep -q "holds" "$dir/out" || fail "sums table: verdict"
# --check means what it means on every command (how digits are confirmed): mpfr is a path analysis's own
# check (a run one tier up), rounding is refused, and the old bare --check names --verify-decomposition.
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --sums --check mpfr --verify-decomposition
grep -q "holds" "$dir/out" || fail "sums --check mpfr: verdict"
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --sums --check rounding
[ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q -- "^sanpath: error: --check: 'rounding' is not a check path analyses can honour" "$dir/err" ||
  fail "--check rounding: $(cat "$dir/err")"
for bare in "--sums --check" "--check --sums"; do
  # shellcheck disable=SC2086
  expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" $bare
  [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q -- "--verify-decomposition" "$dir/err" ||
    fail "bare --check ($bare): $(cat "$dir/err")"
done
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --sample 10 --check certified
grep -q -- "'certified' is not a check path sampling can honour" "$dir/err" || fail "--sample --check certified: $(cat "$dir/err")"
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --sums --check bogus

# --enumerate: every path, 0-based heads with null for skip, in enumeration order.
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --precision double --format json --verify-decomposition
check "enumerate JSON" '
p = j["paths"]
assert len(p) == 27
heads = [tuple(-1 if h is None else h for h in x["heads"]) for x in p]
assert heads == sorted(heads) and len(set(heads)) == 27
assert p[0]["heads"] == [None, None, None] and p[26]["heads"] == [1, 1, 1]
for x in p:
    assert x["length"] == sum(h is not None for h in x["heads"])
    for v in (x["term_norm"]["frobenius"], x["term_norm"]["composite"], x["term_residual"]["composite"],
              x["stochastic_residual"]["composite"]):
        assert isinstance(v, str) and v != "0" and "inf" not in v
assert num(j["decomposition_error"]) < 1e-13
assert j["precision_bits"] == 53 and j["check_precision_bits"] == 128'
# Filters: one length, a range, heads per layer; no decomposition error then.
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --length 2 --format json
check "enumerate --length 2" '
assert len(j["paths"]) == math.comb(3, 2) * 4
assert all(x["length"] == 2 for x in j["paths"])
assert "decomposition_error" not in j'
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --lengths 1:2 --format json
check "enumerate --lengths 1:2" 'assert len(j["paths"]) == 6 + 12'
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --heads-per-layer '1/skip/*' --format json
check "enumerate --heads-per-layer" 'assert [x["heads"] for x in j["paths"]] == [[1, None, None], [1, None, 0], [1, None, 1]]'
# Top K: the K largest ‖T‖_{1,∞} of the full list, descending.
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --format json --output "$dir/all.json"
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --top 5 --threads 2 --format json
check "enumerate --top 5" "
allp = json.load(open('$dir/all.json'))['paths']
best = sorted(allp, key=lambda x: -float(x['term_norm']['composite']))[:5]
assert [x['heads'] for x in j['paths']] == [x['heads'] for x in best]
assert all(x['digits'] >= 30 for x in j['paths'])
assert j['search']['leaves'] <= 27"
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --format csv
head -1 "$dir/out" | grep -q "^h1,h2,h3,length," || fail "enumerate CSV header"
grep -q "^,,,0," "$dir/out" || fail "enumerate CSV: the all-skip path"

# Refusals: the exact count, exit code 5, before any work.
expect 5 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --limit 26
grep -q "27 paths" "$dir/err" || fail "refusal names the count: $(cat "$dir/err")"
big="$dir/big.safetensors"
expect 0 "$SANPATH" init --out "$big" --layers 12 --heads 4 --d-model 8 --skip on --mlp none --layernorm none --d-ff 0
start=$(date +%s%N)
expect 5 "$SANPATH" paths --model "$big" "${IN[@]}" --enumerate
ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep -q "$((5 ** 12)) paths" "$dir/err" || fail "refusal names 5^12: $(cat "$dir/err")"
[ "$ms" -lt 5000 ] || fail "refusal took $ms ms"
# ... while the length sums of the same model need no enumeration.
expect 0 "$SANPATH" paths --model "$big" "${IN[@]}" --sums --precision double --format json
check "sums of 5^12 paths" 'assert sum(int(r["count"]) for r in j["length_sums"]) == 5 ** 12'
# ... nor does a top-K selection (branch and bound, no limit): the same K as a full walk.
expect 0 "$SANPATH" paths --model "$big" "${IN[@]}" --enumerate --top 4 --threads 2 --precision double --format json
check "top 4 of 5^12 paths by branch and bound" "
assert j['walked_paths'] == str(5 ** 12) and len(j['paths']) == 4
s = j['search']
assert s['method'] == 'branch and bound' and 0 < s['leaves'] < 5 ** 12 and s['nodes'] < 5 ** 12
v = [float(x['term_norm']['composite']) for x in j['paths']]
assert v == sorted(v, reverse=True)"
# Not attention-only: input error (3), the library message.
expect 3 "$SANPATH" paths --model "$full" "${IN[@]}" --sums
grep -q "attention-only" "$dir/err" || fail "variant refusal message: $(cat "$dir/err")"
expect 3 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --layernorm pre
expect 0 "$SANPATH" paths --model "$full" "${IN[@]}" --sums --mlp none --layernorm none --format json
check "full model as SAN+skip" 'assert j["variant"]["skip"] == "on" and j["total_paths"] == "9"'

# --effectiveness: k = 0..L, no task head in a native file, the full output at k = L.
expect 0 "$SANPATH" paths --model "$san" "${IN[@]}" --effectiveness --format json
check "effectiveness" "
e = j['effectiveness']
assert [x['length'] for x in e] == [0, 1, 2, 3] and j['head'] is None
assert [x['paths'] for x in e] == ['1', '7', '19', '27']
assert e[-1]['distance'].startswith('< ') and all(x['agree'] is None for x in e)"
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --effectiveness --length 1
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --effectiveness --verify-decomposition
expect 3 "$SANPATH" paths --model "$full" "${IN[@]}" --effectiveness
grep -q "attention-only" "$dir/err" || fail "effectiveness variant refusal: $(cat "$dir/err")"

# --sample: deterministic for a seed; the one all-skip path has no spread.
expect 0 "$SANPATH" paths --model "$san" --random-input 5 --sample 200 --seed 9 --format json --output "$dir/s1.json"
expect 0 "$SANPATH" paths --model "$san" --random-input 5 --sample 200 --seed 9 --format json --output "$dir/s2.json"
cmp -s "$dir/s1.json" "$dir/s2.json" || fail "--sample is not deterministic"
cp "$dir/s1.json" "$dir/out"
check "sample JSON" '
s = j["samples"]
assert [x["length"] for x in s] == [0, 1, 2, 3]
for x in s:
    assert x["samples"] == 200 and x["population"] == str(math.comb(3, x["length"]) * 2 ** x["length"])
    c = x["term_norm"]["composite"]
    lo, hi = (num(v) for v in c["ci95"])
    assert lo <= num(c["mean"]) <= hi
assert s[0]["term_norm"]["composite"]["ci95"][0] == s[0]["term_norm"]["composite"]["mean"]
assert j["seed"] == 9'
expect 0 "$SANPATH" paths --model "$nos" --random-input 5 --sample 50 --length 4 --format json
check "sample --length 4" 'assert [x["length"] for x in j["samples"]] == [4]'

# Usage errors (2).
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}"
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --sums --enumerate
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --sample 1
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --sums --top 3
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --length 4
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --lengths 2:1
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --length 1 --lengths 1:2
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --heads-per-layer '0/2/1'
expect 2 "$SANPATH" paths --model "$san" "${IN[@]}" --enumerate --length 2 --verify-decomposition
expect 2 "$SANPATH" paths --model "$nos" "${IN[@]}" --enumerate --length 2
expect 2 "$SANPATH" paths --model "$san" --tokens 1,2 --seed 3 --sums

# Help: purpose, defaults, two examples.
expect 0 "$SANPATH" paths --help
for want in "Examples" "--enumerate" "--sums" "--sample" "--top" "--limit" "1000000" "--heads-per-layer" "--check" "--verify-decomposition"; do
  grep -q -- "$want" "$dir/out" || fail "help lacks $want"
done

# The real GPT-2 checkpoint as a pure SAN and as SAN+skip: Theorem 2.1 to rounding.
source "$(dirname "$0")/../support/shared.sh"
gpt2="$SHARED/data/real-models/gpt2-capp"
if require_shared_in_ci "$gpt2"; then
  for skip in off on; do
    expect 0 "$SANPATH" paths --model "$gpt2" --tokens 1,5,9,13 --skip "$skip" --mlp none --layernorm none \
      --sums --verify-decomposition --format json
    check "gpt2 skip $skip" "
assert num(j['decomposition_error']) < 2.0 ** -100, j['decomposition_error']
assert j['decomposition_holds'] is True
assert j['variant']['mask'] == 'causal'
assert j['total_paths'] == str((5 if '$skip' == 'on' else 4) ** 4)
assert all(r['digits'] >= 17 for r in j['length_sums'] if r['count'] != '0')"
  done
fi

if [ "$fails" -gt 0 ]; then
  echo "$fails failure(s)" >&2
  exit 1
fi
echo "paths.sh: all passed"
