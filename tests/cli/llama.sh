#!/usr/bin/env bash
# The Llama family from the CLI: `init --layout llama|mistral|qwen2` against
# the native file of the same weights (identical forward JSON in double and
# at 257 bits), refusals of undefined configurations (one line naming
# config.json and the key, exit 3, no output file), and forward, paths
# --sums, bounds and report on the two real TinyStories Llamas (shared dir;
# missing is a failure when CI is set).
# Usage: bash llama.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks llama "$@"
# The forward JSON without the model's source path.
strip_source() { /usr/bin/python3 -c "import json, sys
j = json.load(open('$dir/out')); j['model'].pop('source'); print(json.dumps(j, sort_keys=True))"; }

# --- init: every layout loads back to the native file's forward pass ----------------
SIZE=(--layers 2 --heads 4 --kv-heads 2 --d-model 16 --d-ff 24 --vocab 40 --std 0.3 --seed 9)
expect 0 "$SANPATH" init --out "$dir/native.safetensors" --family llama "${SIZE[@]}"
for prec in double 257; do
  expect 0 "$SANPATH" forward --model "$dir/native.safetensors" --tokens 1,5,7,39,0 --precision $prec --format json
  strip_source >"$dir/native_$prec.json"
done
for layout in llama mistral qwen2; do
  expect 0 "$SANPATH" init --out "$dir/$layout" --layout $layout "${SIZE[@]}"
  [ -f "$dir/$layout/config.json" ] && [ -f "$dir/$layout/model.safetensors" ] || fail "$layout: files missing"
  grep -q "\"model_type\": \"$layout\"" "$dir/$layout/config.json" || fail "$layout: model_type"
  grep -q '"num_key_value_heads": 2' "$dir/$layout/config.json" || fail "$layout: num_key_value_heads"
  for prec in double 257; do
    expect 0 "$SANPATH" forward --model "$dir/$layout" --tokens 1,5,7,39,0 --precision $prec --format json \
      --stream-layers off  # as the native file, which is held whole (streaming: tests/io/test_streamed_layers)
    strip_source >"$dir/${layout}_$prec.json"
    cmp -s "$dir/${layout}_$prec.json" "$dir/native_$prec.json" || fail "$layout at $prec: forward differs from native"
  done
done
# A batch of token files: no position table (rotary), so no length bound (the batch check once compared the
# lengths with the 0 rows of an absent table and refused every batch).
printf '1,5,7,39,0\n2,3\n' >"$dir/batch.txt"
expect 0 "$SANPATH" paths --model "$dir/llama" --tokens-file "$dir/batch.txt" --sums --skip on --mlp none --layernorm none \
  --format json
check "llama token batch" 'assert j["batch"] == 2 and len(j["inputs"]) == 2, (j["batch"], j["inputs"])'
# qwen2 keeps q/k/v biases; llama refuses them by name.
expect 0 "$SANPATH" init --out "$dir/qwen2b" --layout qwen2 "${SIZE[@]}" --bias-std 0.1
grep -q "self_attn.q_proj.bias" "$dir/qwen2b/model.safetensors" || fail "qwen2: q_proj.bias not written"
expect 3 "$SANPATH" init --out "$dir/llamab" --layout llama "${SIZE[@]}" --bias-std 0.1
grep -q "b_Q" "$dir/err" || fail "llama with biases: error does not name b_Q: $(cat "$dir/err")"
expect 2 "$SANPATH" init --out "$dir/x.safetensors" --kv-heads 2
expect 2 "$SANPATH" init --out "$dir/kv3" --layout llama --heads 4 --kv-heads 3 --d-model 16
grep -q "kv_heads" "$dir/err" || fail "--kv-heads 3: error does not name kv_heads"

# --- refusals of configurations math.md §8 does not define ------------------------
refuse() {  # KEY JSON-VALUE
  rm -rf "$dir/bad" "$dir/report.html"
  cp -r "$dir/llama" "$dir/bad"
  /usr/bin/python3 -c "import json; p='$dir/bad/config.json'; c=json.load(open(p)); c['$1']=json.loads('$2'); json.dump(c, open(p, 'w'))"
  expect 3 "$SANPATH" report --model "$dir/bad" --tokens 1,2 --out "$dir/report.html" -q
  [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "$1: error is not one line: $(cat "$dir/err")"
  grep -q "bad/config.json: $1" "$dir/err" || fail "$1: error does not name config.json and the key: $(cat "$dir/err")"
  [ ! -e "$dir/report.html" ] || fail "$1: a report was written"
}
refuse rope_scaling '{"type": "linear", "factor": 2.0}'
refuse partial_rotary_factor 0.5
refuse hidden_act '"gelu"'
refuse mlp_bias true

# --- the real checkpoints ---------------------------------------------------------------
real="$SHARED/data/real-models"
if [ ! -d "$real/llama-stories260k" ]; then
  if [ -n "${CI:-}" ]; then fail "no real Llama checkpoints in $real (CI is set)"; else echo "SKIP: no real Llama checkpoints"; fi
else
  for m in llama-stories260k llama-tinystories-xs; do
    M="$real/$m"
    T=1,403,407,261,378,432,383,286
    expect 0 "$SANPATH" forward --model "$M" --tokens $T --format json
    check "$m forward" '
assert j["model"]["activation"] == "silu" and j["model"]["heads"] == 8
assert len(j["layers"]) == 6 and all(l["digits"] >= 15 for l in j["layers"])
assert j["method"] == "centred", j["method"]  # auto: the centred pass covers the family (math.md 7.1)'
    cp "$dir/out" "$dir/centred.json"
    # The direct pass, confirmed on its own, agrees with every digit both confirm.
    expect 0 "$SANPATH" forward --model "$M" --tokens $T --method direct --format json
    cp "$dir/out" "$dir/direct.json"
    agree "$dir/centred.json" "$dir/direct.json" || fail "$m: centred and direct passes disagree"
    expect 0 "$SANPATH" paths --model "$M" --tokens $T --sums --mlp none --layernorm none --format json
    check "$m paths --sums" '
assert j["total_paths"] == str(9 ** 5)
assert j["decomposition_holds"] is True, j["decomposition_error"]'
    expect 0 "$SANPATH" bounds --model "$M" --tokens $T --skip off --mlp none --layernorm none --format json
    check "$m bounds (SAN)" '
assert j["applicable"] is False and j["beyond_theorems"]["rotary"] is True
assert "rotary" in j["not_applicable"]
assert all(d["verdict"] == "NOT_APPLICABLE" for d in j["depths"])'
    expect 0 "$SANPATH" bounds --model "$M" --tokens $T --skip off --mlp plain --layernorm none --format json
    check "$m bounds (gated MLP)" '
assert j["beyond_theorems"] == dict(j["beyond_theorems"], rotary=True, gated_mlp=True)
assert all(l is None for l in j["lambda"])'
    expect 2 "$SANPATH" bounds --model "$M" --tokens $T --skip off --mlp none --layernorm none --theorem 2.3
    grep -q "rotary" "$dir/err" || fail "$m: --theorem 2.3 error does not name rotary embeddings"
    expect 0 "$SANPATH" report --model "$M" --tokens $T --out "$dir/$m.html" -q
    grep -q "Beyond the theorems" "$dir/$m.html" || fail "$m: the report does not state what the theorems do not cover"
  done
fi
[ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "llama: all checks passed"
