#!/usr/bin/env bash
# A digit count describes the string beside it: on every command and format
# that prints a value with a digit count, the count is the number of
# significant digits printed (tests/support/digit_counts.py says how each is
# matched to its value). JSON and CSV print every confirmed digit, whatever
# --digits asks; a table prints min(confirmed, --digits) and counts those.
# Then an independent check: the JSON of a forward pass against the mpmath
# reference (tests/reference/sanpath_ref.py at 128 more bits), each value to
# the full count printed beside it.
# Usage: bash digit_counts.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks digit_counts "$@"
HERE=$(cd "$(dirname "$0")" && pwd)
COUNTS="/usr/bin/python3 $HERE/../support/digit_counts.py"

cd "$dir" || exit 1
expect 0 "$SANPATH" init --out san.safetensors --layers 3 --heads 2 --d-model 8 --skip off --mlp none --layernorm none --seed 4
expect 0 "$SANPATH" init --out full.safetensors --layers 2 --heads 2 --d-model 8 --seed 4
M=san.safetensors

# run NAME ARGS...: the command in each format, to NAME.table, NAME.json, NAME.csv.
run() {
  local name=$1 f
  shift
  for f in table json csv; do
    "$SANPATH" "$@" --quiet --format $f >"$name.$f" 2>"$name.err" || fail "exit $?: $* --format $f: $(head -c 300 "$name.err")"
  done
}
run fwd forward --model $M --random-input 5
run fwd5 forward --model $M --random-input 5 --digits 5
run fwd60 forward --model $M --random-input 5 --precision 257 --digits 60
run fwd-measures forward --model $M --random-input 6 --seed 1 --measures all
run fwd-double forward --model $M --random-input 5 --precision double
run fwd-certified forward --model $M --random-input 5 --check certified
run fwd-emulate forward --model $M --random-input 6 --seed 1 --measures mu --emulate bf16
run fwd-optimal forward --model $M --random-input 5 --center optimal
run fwd-batch forward --model $M --random-input 5 --batch 3 --measures mu
run collapse collapse --model full.safetensors --random-input 5
run collapse-batch collapse --model full.safetensors --random-input 5 --batch 2 --digits 3
run collapse-emulate collapse --model full.safetensors --random-input 5 --emulate bf16
run sums paths --model $M --random-input 5 --skip on --sums
run sums-certified paths --model $M --random-input 5 --skip on --sums --check certified
run sums-batch paths --model $M --random-input 5 --batch 2 --skip on --sums
run enumerate paths --model $M --random-input 5 --skip on --enumerate
run sample paths --model $M --random-input 5 --skip on --sample 20
run effectiveness paths --model $M --random-input 5 --skip on --effectiveness
run rerun paths --model $M --random-input 5 --skip on --effectiveness --rerun 4 --repeats 3
run effectiveness-batch paths --model $M --random-input 5 --batch 2 --skip on --effectiveness
run rerun-batch paths --model $M --random-input 5 --batch 2 --skip on --effectiveness --rerun 2 --repeats 2
run bounds bounds --model $M --random-input 5 --input-residual 0.05
run bounds-skip bounds --model full.safetensors --random-input 5
run bounds-batch bounds --model $M --random-input 5 --batch 2

# Outputs without a count (bounds' CSV and table, the re-runs' CSV) are left out by name.
for f in json csv table; do
  files=()
  for x in *.$f; do
    case "$f:$x" in csv:bounds*.csv | csv:rerun*.csv | table:bounds.table | table:bounds-skip.table) continue ;; esac
    files+=("$x")
  done
  $COUNTS $f "${files[@]}" >"counts-$f.txt" || fail "$f: a count disagrees with its value: $(grep -v 'counts checked' "counts-$f.txt" | head -5)"
  tail -1 "counts-$f.txt"
done

# JSON carries more digits than the table when more are confirmed than asked.
/usr/bin/python3 -c "
import json
sigs = [len(L['relative_residual'].split('e')[0].replace('.', '')) for L in json.load(open('fwd.json'))['layers']]
assert min(sigs) >= 30, sigs" || fail "forward JSON: 37-38 confirmed digits printed where 20 are asked"

# The HTML report's brackets too.
expect 0 "$SANPATH" report --model full.safetensors --random-input 5 --digits 12 --quiet --out report.html
/usr/bin/python3 - <<'PY' || fail "report: a bracket disagrees with its value"
import re
html = open("report.html", encoding="utf-8").read()
cells = re.findall(r'(\d\.\d+e-?\d+) <span class="digits">\[(\d+)\]</span>', html)
assert len(cells) == 12, cells
bad = [(v, d) for v, d in cells if len(v.split("e")[0].replace(".", "")) != int(d)]
assert not bad, bad
PY

# Independent: every value of a forward JSON agrees with the mpmath reference
# to the count beside it (check_number fails a count above the digits printed).
REF="$HERE/../reference/sanpath_ref.py"
if /usr/bin/python3 -c 'import mpmath' 2>/dev/null; then
  /usr/bin/python3 "$REF" gen-input --out x5.safetensors --tokens 5 --d-model 8 --seed 3 >/dev/null || fail "gen-input"
  for extra in "" "--precision 257 --digits 60" "--precision double"; do
    # shellcheck disable=SC2086
    expect 0 "$SANPATH" forward --model $M --input x5.safetensors $extra --quiet --format json -o ref.json
    $COUNTS json ref.json >/dev/null || fail "reference run ($extra): a count disagrees with its value"
    if out=$(/usr/bin/python3 "$REF" check-forward --model $M --input x5.safetensors ref.json 2>&1); then
      echo "reference, forward ${extra:-auto}: ${out#ok }"
    else
      fail "forward $extra against the mpmath reference: $(echo "$out" | head -5)"
    fi
  done
else
  fail "no mpmath for /usr/bin/python3 (scripts/install-deps test installs python3-mpmath)"
fi

[ "$fails" -eq 0 ] && echo "digit_counts: all passed"
[ "$fails" -eq 0 ]
