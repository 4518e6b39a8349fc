#!/usr/bin/env bash
# sanpath forward --precision double: digits by the rounding check by default
# (JSON check_method "rounding", 53-bit check, the text line says how), the old
# 128-bit confirmation with --check mpfr, refusals of --check where it does not
# apply (exit 2, one line naming --check, no output file), and --help.
# The accuracy of the digits is tested against 257-bit runs in
# tests/analysis/test_double_check.cpp.
# Usage: bash double_check.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks double_check "$@"

M="$dir/m.safetensors"
expect 0 "$SANPATH" init --out "$M" --layers 3 --heads 2 --d-model 16 --vocab 40 --seed 2
F0=("$SANPATH" forward --model "$M" --tokens 1,5,7,29,3,11 --quiet)
F=("${F0[@]}" --precision double)

expect 0 "${F[@]}" --format json
check "default: the rounding check" '
assert j["check_method"] == "rounding" and j["check_precision_bits"] == 53 and j["precision_bits"] == 53, j
for L in j["layers"]:
    assert L["digits"] is not None and 9 <= L["digits"] <= 15, L'
expect 0 "${F[@]}" --format json --check mpfr
check "--check mpfr: a run at 128 bits" '
assert j["check_method"] == "mpfr" and j["check_precision_bits"] == 128, j'
expect 0 "${F[@]}" --format json --no-confirm
check "--no-confirm: no check" 'assert j["check_method"] is None and j["check_precision_bits"] is None, j'
# --no-confirm prints the values it computed, marked unconfirmed, even where a
# SAN has collapsed to double's rounding (layer 2 here: 1.6e-16, noise): a
# number, never a bound "< 1e-N" it did not compute; digits null in JSON,
# "unconfirmed" in the table. Only a residual computed as exactly 0 (layers
# 3 and 4: the rows came out identical) is reported below the resolution.
SAN="$dir/san.safetensors"
expect 0 "$SANPATH" init --out "$SAN" --layers 4 --heads 2 --d-model 8 --skip off --mlp none --layernorm none --seed 2
expect 0 "$SANPATH" forward --model "$SAN" --random-input 5 --seed 2 --precision double --no-confirm --quiet --format json
check "--no-confirm: values as computed" '
assert len(j["layers"]) == 5, j
for L in j["layers"]:
    assert L["digits"] is None and set(L["digits_by_quantity"].values()) == {None}, L
for L in j["layers"][:3]:
    for v in list(L["residual"].values()) + [L["relative_residual"]]:
        assert not v.startswith("<") and float(v) > 0, L
assert float(j["layers"][2]["relative_residual"]) < 1e-12, j["layers"][2]'
expect 0 "$SANPATH" forward --model "$SAN" --random-input 5 --seed 2 --precision double --no-confirm --quiet
awk 'f && NF { if ($NF != "unconfirmed" || ($1 <= 2 && $2 ~ /^</)) bad = 1; rows++ } /^layer / { f = 1 } END { exit !(rows == 5 && !bad) }' "$dir/out" ||
  fail "--no-confirm table: $(cat "$dir/out")"
expect 0 "${F[@]}"
grep -q '^precision: double (direct pass), digits confirmed by double runs rounded upward and downward (margin 10x)$' "$dir/out" ||
  fail "the text output does not say how the digits were obtained: $(grep precision "$dir/out")"
expect 0 "$SANPATH" forward --model "$M" --random-input 6 --precision 128 --quiet --format json
check "auto for MPFR precisions: one tier up" 'assert j["check_method"] == "mpfr" and j["check_precision_bits"] == 257, j'

for bad in "--check rounding --precision 128" "--check rounding --precision auto" \
  "--check rounding --center optimal --precision double" "--check fast --precision double"; do
  # shellcheck disable=SC2086
  expect 2 "${F0[@]}" $bad --output "$dir/bad.json"
  [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q -- '--check' "$dir/err" || fail "$bad: message: $(cat "$dir/err")"
  [ ! -e "$dir/bad.json" ] || fail "$bad: wrote an output file"
done

expect 0 "$SANPATH" forward --help
grep -q -- '--check' "$dir/out" && grep -q 'rounded upward' "$dir/out" || fail "forward --help does not describe --check"
expect 0 "$SANPATH" collapse --help
grep -q -- '--check' "$dir/out" || fail "collapse --help does not list --check"

[ "$fails" -eq 0 ] && echo "double_check: all passed"
exit "$fails"
