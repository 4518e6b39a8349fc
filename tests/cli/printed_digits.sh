#!/usr/bin/env bash
# Printed digits (issue 27's defect): every value carries min(confirmed,
# asked) significant digits, asked with --digits (default 20), in the table,
# JSON and CSV, and in every mode: auto (the centred pass confirmed one tier
# up: 37-38 digits at 128 bits), a fixed multiprecision tier, double (its
# rounding check confirms 12-15), a path decomposition and the HTML report.
# A value with no digit confirmed stays "< 1e-N".
# Usage: bash printed_digits.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks printed_digits "$@"

M="$dir/san.safetensors"
expect 0 "$SANPATH" init --out "$M" --layers 3 --heads 2 --d-model 8 --skip off --mlp none --layernorm none --seed 4

# sig(s): the significant digits of a printed value "d.ddd…e±N".
SIG='
def sig(s):
    mant = s.split("e")[0].lstrip("-").replace(".", "")
    return len(mant)
'
for asked in 30 20 5; do
  expect 0 "$SANPATH" forward --model "$M" --random-input 5 --digits "$asked" --quiet --format json
  check "forward --digits $asked: JSON values carry min(confirmed, asked) digits" "$SIG
asked = $asked
seen = 0
for L in j['layers']:
    for k, v in [('relative_residual', L['relative_residual'])] + [('residual_' + n, L['residual'][n]) for n in ('composite', 'one', 'inf')]:
        d = L['digits_by_quantity'][k]
        assert not v.startswith('<') and d >= min(asked, 15), (L['layer'], k, v, d)
        assert sig(v) == min(d, asked), (L['layer'], k, v, d, asked)
        seen += 1
assert seen == 16, seen"
done

# The table and CSV print the same strings as the JSON.
expect 0 "$SANPATH" forward --model "$M" --random-input 5 --digits 30 --quiet --format json
cp "$dir/out" "$dir/json"
expect 0 "$SANPATH" forward --model "$M" --random-input 5 --digits 30 --quiet
cp "$dir/out" "$dir/table"
expect 0 "$SANPATH" forward --model "$M" --random-input 5 --digits 30 --quiet --format csv
cp "$dir/out" "$dir/csv"
/usr/bin/python3 - "$dir" <<'PY' || fail "table and CSV: the JSON's 30-digit strings"
import json, sys, csv
d = sys.argv[1]
j = json.load(open(d + "/json"))
table = open(d + "/table").read().split("\n")
rows = list(csv.DictReader(open(d + "/csv")))
for L in j["layers"]:
    line = [l for l in table if l.split()[:1] == [str(L["layer"])]][0].split()
    assert line[1] == L["relative_residual"] and line[2] == L["residual"]["composite"], (line, L)
    r = rows[L["layer"]]
    assert r["relative_residual"] == L["relative_residual"] and r["residual_composite"] == L["residual"]["composite"], r
    assert len(L["relative_residual"].split("e")[0].replace(".", "")) == 30
PY

# A fixed tier: 257 bits confirmed at 513 (77 digits carried).
expect 0 "$SANPATH" forward --model "$M" --random-input 5 --precision 257 --digits 60 --quiet --format json
check "forward --precision 257 --digits 60: 60 digits where 60 are confirmed, the confirmed ones elsewhere" "$SIG
wide = 0
for L in j['layers']:
    v, d = L['relative_residual'], L['digits_by_quantity']['relative_residual']
    assert not v.startswith('<') and sig(v) == min(d, 60), (L['layer'], v, d)
    wide += d >= 60
assert wide >= 2, wide  # the direct pass loses a collapsed layer's orders of magnitude, not the first layers'"

# Double: the rounding check confirms fewer than asked; those are printed.
expect 0 "$SANPATH" forward --model "$M" --random-input 5 --precision double --quiet --format json
check "forward --precision double: the confirmed digits (fewer than the 20 asked)" "$SIG
for L in j['layers']:
    v, d = L['relative_residual'], L['digits_by_quantity']['relative_residual']
    if v.startswith('<'):
        assert d == 0, (v, d)
    else:
        assert d <= 16 and sig(v) == max(d, 1), (L['layer'], v, d)"

# Paths: the length sums at 128 bits.
expect 0 "$SANPATH" paths --model "$M" --random-input 5 --skip on --sums --digits 25 --quiet --format json
check "paths --sums --digits 25: 25 digits where confirmed" "$SIG
n = 0
for e in j['length_sums']:
    for v, d in [(e['norm']['frobenius'], e['digits_by_quantity']['frobenius']), (e['share'], e['digits_by_quantity']['share']),
                 (e['residual']['composite'], e['digits_by_quantity']['residual'])]:
        assert not v.startswith('<') and sig(v) == min(d, 25), (e['length'], v, d)
        n += d > 25
assert n >= 6, n"

# The HTML report: every variant's layers as collapse prints them, 30 digits.
expect 0 "$SANPATH" report --model "$M" --random-input 5 --digits 30 --quiet --out "$dir/report.html"
expect 0 "$SANPATH" collapse --model "$M" --random-input 5 --digits 30 --quiet --format json
check "report --digits 30: the collapse values, 30 digits, in the HTML" "$SIG
html = open('$dir/report.html', encoding='utf-8').read()
vals = [L['relative_residual'] for v in j['variants'] for L in v['layers'] if not L['relative_residual'].startswith('<')]
assert len(vals) == 16 and all(sig(v) == 30 for v in vals), vals
missing = [v for v in vals if v not in html]
assert not missing, missing"

[ "$fails" -eq 0 ] && echo "printed_digits: all passed"
[ "$fails" -eq 0 ]
