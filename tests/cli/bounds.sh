#!/usr/bin/env bash
# `sanpath bounds`: the bounds of Theorems 2.2/2.3 against measured residuals.
#  - a random SAN with small weights at auto precision: a verdict at every
#    depth, measured ≤ bound (HOLDS) where the bound is not vacuous, and a
#    JSON with every field;
#  - skip on: the theorem does not apply, residuals with and without skip side
#    by side; --theorem 2.2 on H > 1 is a usage error (exit 2);
#  - the issue's done-criterion: a 10-layer weight-shared SAN (ALBERT-style)
#    at auto precision (centred pass) measures every depth, down to 1e-10000
#    and below, and decides a verdict at each; with --method direct, depths
#    beyond the top precision are true upper bounds and the ceiling is stated;
#  - the counterexample search is deterministic for a seed and its saved files
#    re-check with `sanpath bounds --model … --input …`;
#  - the BERT checkpoint's attention weights as a pure SAN (when present).
#
# Usage: bash bounds.sh <sanpath binary> <shared dir> <tmp dir>
set -uo pipefail

source "$(dirname "$0")/../support/cli.sh"
cli_workdir bounds "$@"

count=0
failed=0
ok() { count=$((count + 1)); printf 'ok   %s\n' "$1"; }
fail() { count=$((count + 1)); failed=$((failed + 1)); printf 'FAIL %s\n' "$1"; [ -n "${2:-}" ] && printf '       %s\n' "$2"; }
# expect NAME: runs the rest as a check; ok when it exits 0, else FAIL with its output.
expect() {
  local name=$1
  shift
  local out
  if out=$("$@" 2>&1); then ok "$name"; else fail "$name" "$(printf '%s' "$out" | head -c 1500)"; fi
}
# pycheck FILE PYTHON: runs PYTHON with j = the JSON of FILE; asserts inside.
pycheck() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
def exp10(s):
    """The decimal exponent of a number string ("2.3e-48213" -> -48213)."""
    return int(s.split('e')[1]) if 'e' in s else (0 if abs(float(s)) >= 1 else -1)
exec(sys.argv[2])
EOF
}

# ---- a random SAN with small weights: HOLDS at every depth ---------------------------
"$SANPATH" init --out "$T/san.safetensors" --layers 4 --heads 2 --d-model 8 --d-qk 4 --d-v 4 --d-ff 0 \
  --skip off --mlp none --layernorm none --std 0.3 --seed 1 || fail "init san"
SAN=("$SANPATH" bounds --model "$T/san.safetensors" --random-input 6 --seed 1 --input-residual 0.05 --quiet)
if "${SAN[@]}" --format json --output "$T/san.json"; then
  expect "san: every field, HOLDS at every depth, measured <= bound" pycheck "$T/san.json" '
for k in ["gamma", "theorem", "a", "contraction_radius", "beta", "depths", "vacuous", "vacuity", "not_applicable",
          "precision_bits", "check_precision_bits", "tried_bits", "ceiling_reached", "precision_note", "r0", "notes"]:
    assert k in j, k
assert j["gamma"] == "1" and j["theorem"] == "2.3" and j["applicable"] and not j["vacuous"], j["vacuity"]
assert len(j["beta"]) == 4 and len(j["depths"]) == 4
assert j["check_precision_bits"] > j["precision_bits"]
for d in j["depths"]:
    for k in ["layer", "bound", "log10_bound", "layerwise_bound", "measured", "verdict", "slack_log10",
              "cubic_constant", "order", "a_layer"]:
        assert d[k] is not None, (d["layer"], k)
    assert d["verdict"] == "HOLDS", d
    assert not d["measured"]["below_resolution"]
    assert float(d["log10_measured_upper"]) <= float(d["log10_bound"]), d
    assert float(d["slack_log10"]) > 0
    assert exp10(d["measured"]["upper"]) == exp10(d["measured"]["lower"]) or d["layer"] == 0 or True
assert exp10(j["depths"][3]["measured"]["upper"]) < -150, j["depths"][3]["measured"]
'
else
  fail "san: bounds --format json failed"
fi
if "${SAN[@]}" >"$T/san.txt"; then
  expect "san: table shows gamma, theorem, verdicts, slack, â_l vs a_l, q_l" bash -c "
    grep -q 'gamma = 1' '$T/san.txt' && grep -q 'Theorem 2.3' '$T/san.txt' && grep -q 'HOLDS' '$T/san.txt' &&
    grep -q 'slack log10' '$T/san.txt' && grep -q 'â_l' '$T/san.txt' && grep -q 'a_l' '$T/san.txt' &&
    grep -q 'q_l' '$T/san.txt' && grep -q 'contraction radius' '$T/san.txt' && ! grep -qw 'inf' '$T/san.txt'"
else
  fail "san: bounds table failed"
fi
if "${SAN[@]}" --gamma 0.5 --format json --output "$T/gamma.json"; then
  expect "gamma 0.5 is printed and halves a" pycheck "$T/gamma.json" '
one = json.load(open(sys.argv[1].replace("gamma.json", "san.json")))
assert j["gamma"] == "0.5"
assert abs(float(one["a"]) / float(j["a"]) - 2) < 1e-12
'
else
  fail "gamma 0.5 failed"
fi

# ---- usage errors: exit 2, one line -------------------------------------------------
usage() {  # usage NAME REGEX args...
  local name=$1 regex=$2
  shift 2
  "$SANPATH" bounds --quiet "$@" >"$T/out" 2>"$T/err"
  local code=$?
  if [ "$code" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -Eq -- "$regex" "$T/err" && [ ! -s "$T/out" ]; then
    ok "$name (exit 2: $(cat "$T/err"))"
  else
    fail "$name" "exit $code, stderr: $(cat "$T/err")"
  fi
}
usage "--theorem 2.2 on H = 2" "Theorem 2.2 needs a single head" --model "$T/san.safetensors" --random-input 6 --theorem 2.2
usage "--theorem 2.3 with skip on" "does not apply.*Claim 3.1" --model "$T/san.safetensors" --random-input 6 \
  --theorem 2.3 --skip on
usage "--theorem 4.1" "--theorem" --model "$T/san.safetensors" --random-input 6 --theorem 4.1
usage "--gamma 0" "--gamma.*> 0" --model "$T/san.safetensors" --random-input 6 --gamma 0
usage "--gamma abc" "--gamma" --model "$T/san.safetensors" --random-input 6 --gamma abc
usage "no --model" "--model is required" --random-input 6
usage "no input" "input is required" --model "$T/san.safetensors"
usage "--layers without --search" "--layers: only with --search" --model "$T/san.safetensors" --random-input 6 --layers 3
usage "--search without --save" "--save FILE is required" --search
usage "--search with --model" "--search: builds its own" --search --model "$T/san.safetensors" --save "$T/x.safetensors"
usage "--search with --theorem 2.2 and H = 2" "single head" --search --heads 2 --theorem 2.2 --save "$T/x.safetensors"

# ---- skip on: not applicable, side by side ---------------------------------------------
if "${SAN[@]}" --skip on >"$T/skip.txt" && "${SAN[@]}" --skip on --format json --output "$T/skip.json"; then
  expect "skip on: table says the theorem does not apply and shows both residuals" bash -c "
    grep -q 'NOT APPLICABLE' '$T/skip.txt' && grep -q 'Claim 3.1' '$T/skip.txt' &&
    grep -q 'r_l with skip' '$T/skip.txt' && grep -q 'r_l without skip' '$T/skip.txt'"
  expect "skip on: JSON statement and the residuals without skip" pycheck "$T/skip.json" '
assert j["theorem"] == "none" and j["applicable"] is False and "Claim 3.1" in j["not_applicable"]
assert j["a"] is None and j["vacuity"] is None
w = j["without_skip"]
assert w["variant"]["skip"] == "off" and len(w["depths"]) == 5
assert all(d["verdict"] == "NOT_APPLICABLE" and d["bound"] is None for d in j["depths"])
# with skip the residual stays, without it collapses
assert exp10(j["depths"][3]["measured"]["upper"]) > -5
assert exp10(w["depths"][4]["measured"]["upper"]) < -100
'
else
  fail "skip on: bounds failed"
fi

# ---- the done-criterion: ALBERT-style 10 shared layers ---------------------------------
"$SANPATH" init --out "$T/albert10.safetensors" --shared-layers --layers 10 --heads 2 --d-model 8 --d-ff 0 \
  --skip off --mlp none --layernorm none --std 0.3 --seed 7 || fail "init albert10"
ALBERT=("$SANPATH" bounds --model "$T/albert10.safetensors" --random-input 6 --seed 1 --input-residual 0.05 --quiet)
start=$(date +%s)
if "${ALBERT[@]}" --format json --output "$T/albert.json" && "${ALBERT[@]}" >"$T/albert.txt"; then
  expect "albert10: the centred pass measures all 10 depths (below 1e-1000) and decides every verdict" \
    pycheck "$T/albert.json" '
assert j["model"]["shared_layers"] and j["theorem"] == "2.3" and not j["vacuous"]
assert j["method"] == "centred"
ds = j["depths"]
assert len(ds) == 10
assert not any(d["measured"]["below_resolution"] for d in ds), [d["measured"]["upper"] for d in ds]
assert all(d["verdict"] == "HOLDS" for d in ds), [d["verdict"] for d in ds]
assert min(exp10(d["bound"]) for d in ds) < -1000
# depth 10 is far below what the top tier (32772 bits, 1e-9865) resolves directly
assert exp10(ds[9]["measured"]["upper"]) < -10000, ds[9]["measured"]["upper"]
assert not j["ceiling_reached"] and j["upper_bound_only"] == []
assert j["precision_bits"] <= 513 and j["check_precision_bits"] > j["precision_bits"]
'
  expect "albert10: table states the centred pass and prints exponents beyond 1e-10000, no upper bound" bash -c "
    grep -q 'centred forward pass' '$T/albert.txt' && ! grep -q '< 1e-' '$T/albert.txt' &&
    grep -Eq 'e-[0-9]{5,}' '$T/albert.txt'"
  echo "     (albert10: json + table in $(($(date +%s) - start)) s)"
else
  fail "albert10: bounds failed"
fi
# The direct pass (the former method) cannot: depths beyond the top precision are upper bounds,
# never rounding noise printed as a value, and the output says the ceiling was reached.
start=$(date +%s)
if "${ALBERT[@]}" --method direct --format json --output "$T/albert-direct.json"; then
  expect "albert10 --method direct: depth 10 is an upper bound, the ceiling is stated, the bounds agree" \
    pycheck "$T/albert-direct.json" '
c = json.load(open(sys.argv[1].replace("albert-direct.json", "albert.json")))
assert j["method"] == "direct"
ds = j["depths"]
assert ds[9]["measured"]["below_resolution"] and ds[9]["verdict_on_upper_bound"]
assert j["ceiling_reached"] and 10 in j["upper_bound_only"]
assert "upper bound" in j["precision_note"] and "ceiling" in j["precision_note"]
assert j["check_precision_bits"] == 32772
# the upper bound is true: above the centred measurement
assert exp10(ds[9]["measured"]["upper"]) > exp10(c["depths"][9]["measured"]["upper"])
# where the direct pass resolves, both methods agree to the digits both confirm
for d, e in zip(ds, c["depths"]):
    if d["measured"]["below_resolution"]: continue
    a, b = d["measured"]["upper"], e["measured"]["upper"]
    n = min(d["measured"]["digits"] or 0, e["measured"]["digits"] or 0, 6)
    ma, mb = float(a.split("e")[0]), float(b.split("e")[0])
    assert n >= 1 and exp10(a) == exp10(b) and abs(ma - mb) <= 10 ** (1 - n) * max(ma, mb), (a, b, n)
'
  echo "     (albert10 --method direct: json in $(($(date +%s) - start)) s)"
else
  fail "albert10 --method direct: bounds failed"
fi

# ---- the counterexample search: deterministic, saved files re-check ----------------
SEARCH=("$SANPATH" bounds --search --layers 2 --heads 1 --d-model 3 --d-qk 2 --tokens-n 3 --seed 4 --iterations 60
  --quiet --format json)
if "${SEARCH[@]}" --save "$T/a.safetensors" --output "$T/a.json" &&
  "${SEARCH[@]}" --save "$T/b.safetensors" --output "$T/b.json"; then
  expect "search: same seed, byte-identical model and input files" bash -c "
    cmp '$T/a.safetensors' '$T/b.safetensors' && cmp '$T/a.input.safetensors' '$T/b.input.safetensors'"
  expect "search: same seed, same report" python3 -c "
import json
a, b = json.load(open('$T/a.json')), json.load(open('$T/b.json'))
for j in (a, b): j.pop('saved'); j.pop('recheck_command')
assert a == b
assert a['evaluations'] == 60 and a['improvements']
"
  if "$SANPATH" bounds --model "$T/a.safetensors" --input "$T/a.input.safetensors" --quiet --format json \
    --output "$T/recheck.json"; then
    expect "search: the saved files re-check with sanpath bounds" pycheck "$T/recheck.json" '
s = json.load(open(sys.argv[1].replace("recheck.json", "a.json")))
r = s["recheck"]
assert [d["verdict"] for d in j["depths"]] == [d["verdict"] for d in r["depths"]]
assert [d["measured"]["upper"] for d in j["depths"]] == [d["measured"]["upper"] for d in r["depths"]]
assert [d["bound"] for d in j["depths"]] == [d["bound"] for d in r["depths"]]
assert s["violated"] == any(d["verdict"] == "VIOLATED" for d in j["depths"])
'
  else
    fail "search: re-check of the saved files failed"
  fi
else
  fail "search: bounds --search failed"
fi

# ---- the BERT checkpoint's attention as a pure SAN -------------------------------------
source "$(dirname "$0")/../support/shared.sh"
if require_shared_in_ci "$REAL/bert-ticket-classifier"; then
  if "$SANPATH" bounds --model "$REAL/bert-ticket-classifier" --tokens 2,15,27,3 --skip off --mlp none \
    --layernorm none --quiet --format json --output "$T/bert.json"; then
    expect "bert pure SAN: complete JSON" pycheck "$T/bert.json" '
assert j["theorem"] == "2.3" and j["applicable"] and j["a"] and j["contraction_radius"]
assert len(j["beta"]) == j["model"]["layers"] == len(j["depths"])
assert j["vacuity"]
for d in j["depths"]:
    for k in ["bound", "log10_bound", "layerwise_bound", "slack_log10", "a_layer"]:
        assert d[k] is not None, k
    assert d["measured"]["upper"] and d["verdict"] in ("HOLDS", "UNDECIDED", "VIOLATED")
'
  else
    fail "bert pure SAN: bounds failed"
  fi
fi

echo "$((count - failed))/$count passed"
[ "$failed" -eq 0 ]
