#!/usr/bin/env bash
# Printed digits: JSON and CSV print every confirmed digit of a value, so
# that its digit count is the number of its significant digits; a table
# prints min(confirmed, asked), asked with --digits (default 20), and the
# count it shows is the digits printed. In every mode: auto (the centred
# pass confirmed one tier up: 37-38 digits at 128 bits), a fixed
# multiprecision tier, double (its rounding check confirms 12-15), a path
# decomposition and the HTML report. A value with no digit confirmed stays
# "< 1e-N". (tests/cli/digit_counts.sh checks every command and format.)
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
  check "forward --digits $asked: JSON values carry every confirmed digit" "$SIG
asked = $asked
seen = 0
for L in j['layers']:
    for k, v in [('relative_residual', L['relative_residual'])] + [('residual_' + n, L['residual'][n]) for n in ('composite', 'one', 'inf')]:
        d = L['digits_by_quantity'][k]
        assert not v.startswith('<') and d >= min(asked, 15), (L['layer'], k, v, d)
        assert sig(v) == d, (L['layer'], k, v, d, asked)
        seen += 1
assert seen == 16, seen"
done

# The CSV prints the JSON's strings; the table the same values rounded to
# the 30 digits asked, its digits column the digits it prints.
expect 0 "$SANPATH" forward --model "$M" --random-input 5 --digits 30 --quiet --format json
cp "$dir/out" "$dir/json"
expect 0 "$SANPATH" forward --model "$M" --random-input 5 --digits 30 --quiet
cp "$dir/out" "$dir/table"
expect 0 "$SANPATH" forward --model "$M" --random-input 5 --digits 30 --quiet --format csv
cp "$dir/out" "$dir/csv"
/usr/bin/python3 - "$dir" <<'PY' || fail "table and CSV: the JSON's strings, the table's to 30 digits"
import json, sys, csv
from decimal import Decimal, getcontext
getcontext().prec = 100
d = sys.argv[1]
j = json.load(open(d + "/json"))
table = open(d + "/table").read().split("\n")
rows = list(csv.DictReader(open(d + "/csv")))
def sig(s):
    return len(s.split("e")[0].lstrip("-").replace(".", ""))
def rounded(s, n):  # s to n significant digits, as a number
    return Decimal(s).quantize(Decimal(1).scaleb(Decimal(s).adjusted() - n + 1))
assert "digits: those printed, at most 30 (--digits); every confirmed digit in --format json" in table, table
for L in j["layers"]:
    line = [l for l in table if l.split()[:1] == [str(L["layer"])]][0].split()
    full, res = L["relative_residual"], L["residual"]["composite"]
    assert sig(full) > 30 and sig(line[1]) == 30 and Decimal(line[1]) == rounded(full, 30), (line, L)
    assert Decimal(line[2]) == rounded(res, 30), (line, L)
    assert int(line[4]) == min(L["digits"], 30), (line, L)
    r = rows[L["layer"]]
    assert r["relative_residual"] == full and r["residual_composite"] == res, r
PY

# A fixed tier: 257 bits confirmed at 513 (77 digits carried).
expect 0 "$SANPATH" forward --model "$M" --random-input 5 --precision 257 --digits 60 --quiet --format json
check "forward --precision 257 --digits 60: every confirmed digit, 60 or more where 60 are confirmed" "$SIG
wide = 0
for L in j['layers']:
    v, d = L['relative_residual'], L['digits_by_quantity']['relative_residual']
    assert not v.startswith('<') and sig(v) == d, (L['layer'], v, d)
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
check "paths --sums --digits 25: every confirmed digit" "$SIG
n = 0
for e in j['length_sums']:
    for v, d in [(e['norm']['frobenius'], e['digits_by_quantity']['frobenius']), (e['share'], e['digits_by_quantity']['share']),
                 (e['residual']['composite'], e['digits_by_quantity']['residual'])]:
        assert not v.startswith('<') and sig(v) == d, (e['length'], v, d)
        n += d > 25
assert n >= 6, n"

# The HTML report: every variant's layers as the collapse table prints them, 30 digits [30].
expect 0 "$SANPATH" report --model "$M" --random-input 5 --digits 30 --quiet --out "$dir/report.html"
expect 0 "$SANPATH" collapse --model "$M" --random-input 5 --digits 30 --quiet
cp "$dir/out" "$dir/collapse.txt"
/usr/bin/python3 - "$dir" <<'PY' || fail "report --digits 30: the collapse table's cells, 30 digits, in the HTML"
import re, sys
d = sys.argv[1]
html = open(d + "/report.html", encoding="utf-8").read()
cells = re.findall(r"(\d\.\d+e-?\d+) \[(\d+)\]", open(d + "/collapse.txt", encoding="utf-8").read())
assert len(cells) == 16 and all(len(v.split("e")[0]) == 31 and c == "30" for v, c in cells), cells
missing = [v for v, c in cells if f'{v} <span class="digits">[{c}]</span>' not in html]
assert not missing, missing
PY

[ "$fails" -eq 0 ] && echo "printed_digits: all passed"
[ "$fails" -eq 0 ]
