#!/usr/bin/env bash
# sanpath forward/collapse --emulate fp32|bf16|fp16 (math.md §9, docs/math.md
# §9): the JSON "emulation" object (format, per-layer relative residual and
# measures of the emulated model with confirmed and correct digits, the first
# layer without a correct digit, the overflow), the tables, an fp16 overflow
# reported with its layer and operation (later layers non-finite, nothing
# measured there), every layout family emulated in bf16, bad values (exit 2,
# one line naming --emulate). The emulated values are checked bit for bit
# against the numpy reference in python/tests/test_emulate_reference.py and
# tests/compute/test_emulate.cpp; their exact measurement in
# python/tests/test_measures.py.
# Usage: bash emulate.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks emulate "$@"

SAN="$dir/san.safetensors"
expect 0 "$SANPATH" init --out "$SAN" --layers 3 --heads 2 --d-model 8 --skip off --mlp none --layernorm none --seed 4
expect 0 "$SANPATH" forward --model "$SAN" --random-input 6 --seed 1 --measures mu,cosine --emulate bf16 --quiet --format json
check "forward --emulate bf16: the emulation object" '
e = j["emulation"]
assert e["format"] == "bf16" and e["overflow"] is None and "fp32" in e["rule"], e
assert len(e["layers"]) == len(j["layers"]) == 4
names = ["relative_residual", "mu", "cosine", "one_minus_cosine"]
assert list(e["first_layer_without_correct_digit"]) == names, e["first_layer_without_correct_digit"]
for L, X in zip(e["layers"], j["layers"]):
    assert list(L["correct_digits"]) == names and list(L["measures"]) == names[1:], L
    for k in names:
        assert L["digits_by_quantity"][k] >= 30, L
    # correct digits against the exact values, recomputed from the printed numbers
    x, y = num(X["relative_residual"]), num(L["relative_residual"])
    c = L["correct_digits"]["relative_residual"]
    if x != y:
        assert c == max(0, min(17, math.floor(-math.log10(abs(y - x) / abs(x))))) or c == max(0, math.floor(-math.log10(abs(y - x) / abs(x))) - 1), (x, y, c)
# bf16 rounds X^0 to 8 bits: 2 or 3 digits at the input, none once the SAN collapsed below 1e-3
assert e["layers"][0]["correct_digits"]["relative_residual"] in (2, 3, 4), e["layers"][0]
assert e["first_layer_without_correct_digit"]["relative_residual"] in (1, 2), e["first_layer_without_correct_digit"]'
expect 0 "$SANPATH" forward --model "$SAN" --random-input 6 --seed 1 --emulate fp32 --quiet
grep -q "^fp32 emulation (math.md §9): the model evaluated as a fp32 framework would" "$dir/out" || fail "forward table: no emulation table"
grep -q "^first layer without a correct digit: relative_residual " "$dir/out" || fail "forward table: no footer"

# fp16 overflow: weights of std 3 without LayerNorm overflow in layer 1's MLP.
BIG="$dir/big.safetensors"
expect 0 "$SANPATH" init --out "$BIG" --layers 3 --heads 2 --d-model 16 --std 3 --seed 1 --layernorm none
expect 0 "$SANPATH" forward --model "$BIG" --random-input 5 --seed 1 --emulate fp16 --quiet --format json
check "fp16 overflow: reported, later layers non-finite" '
e = j["emulation"]
assert e["overflow"] == "layer 1, MLP: overflow to inf (fp16'"'"'s largest finite value is 65504)", e["overflow"]
assert [L.get("non_finite", False) for L in e["layers"]] == [False, True, True, True], e["layers"]
assert e["first_layer_without_correct_digit"]["relative_residual"] == 1
assert all(num(L["relative_residual"]) > 0 for L in j["layers"])'
expect 0 "$SANPATH" forward --model "$BIG" --random-input 5 --seed 1 --emulate bf16 --quiet --format json
check "the same in bf16: no overflow (fp32 range)" 'assert j["emulation"]["overflow"] is None, j["emulation"]'

# collapse: every variant carries its emulation; the table has the emulated residuals.
expect 0 "$SANPATH" collapse --emulate bf16 --quiet --format json
check "collapse --emulate bf16" '
for v in j["variants"]:
    assert v["emulation"]["format"] == "bf16" and len(v["emulation"]["layers"]) == 13, v["name"]
san = [v for v in j["variants"] if v["name"] == "SAN"][0]
assert san["emulation"]["first_layer_without_correct_digit"]["relative_residual"] is not None'
expect 0 "$SANPATH" collapse --emulate bf16 --quiet
grep -q "^bf16 emulation (math.md §9): relative residual of the model" "$dir/out" || fail "collapse table"
expect 0 "$SANPATH" collapse --random-input 6 --batch 2 --seed 1 --emulate fp16 --quiet
grep -q "^fp16 emulation (math.md §9): relative residual of the model evaluated as a fp16 framework would, measured exactly, mean ± std" "$dir/out" || fail "collapse batch table"

# Refusals: a bad format (exit 2), an architecture the emulation does not run
# (exit 3, before any exact run), no output file.
expect 2 "$SANPATH" forward --model "$SAN" --random-input 6 --emulate fp8 --output "$dir/never.json"
grep -qx "sanpath: error: --emulate: emulate: 'fp8' is not one of fp32, bf16, fp16" "$dir/err" || fail "bad format: $(cat "$dir/err")"
[ ! -e "$dir/never.json" ] || fail "bad format: an output file"

# Every family runs emulated (docs/math.md §9 rules 10–13: XLNet's and T5's
# position terms, the soft cap and windows, parallel blocks, sandwich norms,
# partial rotary): a bf16 emulation object beside the exact run, every layer
# measured with its digits, no refusal.
source "$(dirname "$0")/../support/family_options.sh"
FAMILY_OPTS[phi]="${FAMILY_OPTS[phi]} --activation gelu_fast"  # and the gelu_fast activation
for fam in bert gpt2 albert roberta distilbert llama mistral qwen2 xlnet t5 gpt_neox phi opt gemma gemma2 vit; do
  M="$dir/fam-$fam"
  opts=${FAMILY_OPTS[$fam]:---vocab 20}
  [ $fam = albert ] && opts="--shared-layers"  # written without embeddings: a random input
  # shellcheck disable=SC2086
  expect 0 "$SANPATH" init --out "$M" --layout $fam "${FAMILY_SIZE[@]}" $opts
  if [ $fam = vit ]; then
    /usr/bin/python3 - "$dir/img.safetensors" <<'PY'
import json, math, struct, sys
values = [math.sin(0.37 * k) for k in range(192)]
data = struct.pack("<192f", *values)
header = json.dumps({"pixel_values": {"dtype": "F32", "shape": [3, 8, 8], "data_offsets": [0, len(data)]}}).encode()
header += b" " * (-len(header) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header + data)
PY
    IN=(--pixels "$dir/img.safetensors")
  elif [ $fam = albert ]; then
    IN=(--random-input 5 --seed 1)
  else
    IN=(--tokens 2,5,7,3,19)  # not 1: RoBERTa's padding token (refused)
  fi
  expect 0 "$SANPATH" forward --model "$M" "${IN[@]}" --measures mu,cosine --emulate bf16 --quiet --format json
  check "$fam forward --emulate bf16" '
e = j["emulation"]
assert e["format"] == "bf16" and e["overflow"] is None, e
assert len(e["layers"]) == len(j["layers"]) == 3, len(e["layers"])
for L in e["layers"]:
    assert list(L["measures"]) == ["mu", "cosine", "one_minus_cosine"], L
    assert L["digits_by_quantity"]["relative_residual"] >= 30, L
    assert L["correct_digits"]["relative_residual"] >= 0, L
    assert num(L["relative_residual"]) > 0, L'
  grep -qi "not emulated" "$dir/err" && fail "$fam: $(cat "$dir/err")"
done
"$SANPATH" forward --help | grep -q -- "--emulate" || fail "forward --help: no --emulate"

[ "$fails" -eq 0 ] && echo "emulate: all passed"
exit "$fails"
