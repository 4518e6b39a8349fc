#!/usr/bin/env bash
# Qwen3 and Gemma 3 from the CLI (families.md, query/key norms): `init
# --layout qwen3|gemma3` writes the config.json families.md describes (the
# layer pattern, both rotary bases, the linear factor), `--model` reads it
# whole, streamed or cut to its first layers, and every command runs on it:
# forward (auto's centred pass, which agrees with the direct pass; certified
# digits; fp32/bf16 emulation; a --tokens-file batch, each input equal to its
# own run), collapse (both conventions), paths (sums, --enumerate, --top, the
# LM head's effectiveness), bounds (saying the cubic bounds do not cover it),
# report. The numbers themselves are checked against the independent
# reference in reference_families.sh, reference_paths.sh,
# reference_effectiveness.sh and certified_families.sh; MPI in mpi.sh.
# Usage: bash query_key_norm_families.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks query_key_norm_families "$@"

SIZE=(--layers 3 --heads 2 --kv-heads 1 --head-dim 4 --d-model 8 --d-ff 12 --std 0.3 --seed 5 --vocab 20)
expect 0 "$SANPATH" init --out "$dir/qwen3" --layout qwen3 "${SIZE[@]}" --rope-theta 1000000
expect 0 "$SANPATH" init --out "$dir/gemma3" --layout gemma3 "${SIZE[@]}" --layer-pattern 3 --sliding-window 2 \
  --rope-local-base 500 --rope-linear-factor 8 --rope-theta 1000000 --query-pre-attn-scalar 16
/usr/bin/python3 - "$dir" <<'PY' || fail "config.json"
import json, sys
q = json.load(open(sys.argv[1] + "/qwen3/config.json"))
assert q["model_type"] == "qwen3" and q["head_dim"] == 4 and q["num_key_value_heads"] == 1, q
assert q["rope_theta"] == 1e6 and q["rope_scaling"] is None and q["use_sliding_window"] is False, q
g = json.load(open(sys.argv[1] + "/gemma3/config.json"))
assert g["model_type"] == "gemma3_text", g
assert g["layer_types"] == ["sliding_attention", "sliding_attention", "full_attention"], g["layer_types"]
assert g["sliding_window_pattern"] == 3 and g["sliding_window"] == 2, g
assert (g["rope_local_base_freq"], g["rope_theta"]) == (500.0, 1e6), g
assert g["rope_scaling"] == {"rope_type": "linear", "factor": 8.0}, g["rope_scaling"]
assert g["query_pre_attn_scalar"] == 16.0 and g["attn_logit_softcapping"] is None, g
PY

# Options of another family, and values the family refuses.
expect 2 "$SANPATH" init --out "$dir/x" --layout qwen3 "${SIZE[@]}" --layer-pattern 2
grep -q "layer_pattern: not an option of the qwen3 layout" "$dir/err" || fail "qwen3 --layer-pattern: $(cat "$dir/err")"
expect 2 "$SANPATH" init --out "$dir/x" --layout gemma3 "${SIZE[@]}" --rope-linear-factor 0.5
grep -q "rope_linear_factor: must be a finite number >= 1" "$dir/err" || fail "gemma3 factor 0.5: $(cat "$dir/err")"
expect 2 "$SANPATH" init --out "$dir/x" --layout gemma3 "${SIZE[@]}" --softcap 30
expect 2 "$SANPATH" init --out "$dir/x" --layout llama "${SIZE[@]}" --rope-local-base 500

# Every command runs, whatever the load; the centred pass agrees with the direct pass.
for fam in qwen3 gemma3; do
  M=$dir/$fam
  for load in "" "--stream-layers on" "--first-layers 2"; do
    # shellcheck disable=SC2086
    expect 0 "$SANPATH" forward --model "$M" --tokens 1,2,3,4,5 $load --format json
    check "$fam forward $load" '
assert j["method"] == "centred", j["method"]
assert all(l["digits"] is not None and l["digits"] >= 15 for l in j["layers"]), [l["digits"] for l in j["layers"]]'
    for v in "--skip off --mlp none --layernorm none" ""; do
      # shellcheck disable=SC2086
      expect 0 "$SANPATH" forward --model "$M" --tokens 1,2,3,4,5 $load $v --format json --precision 257
      cp "$dir/out" "$dir/$fam-c.json"
      # shellcheck disable=SC2086
      expect 0 "$SANPATH" forward --model "$M" --tokens 1,2,3,4,5 $load $v --format json --precision 257 --method direct
      agree "$dir/$fam-c.json" "$dir/out" || fail "$fam ($load $v): centred and direct passes disagree"
    done
    # shellcheck disable=SC2086
    expect 0 "$SANPATH" forward --model "$M" --tokens 1,2,3,4,5 $load --emulate bf16 --format json
  done
  expect 0 "$SANPATH" forward --model "$M" --tokens 1,2,3,4,5 --check certified --format json
  check "$fam certified" 'assert all(l["digits"] is not None and l["digits"] >= 10 for l in j["layers"]), j["layers"]'
  expect 0 "$SANPATH" collapse --model "$M" --tokens 1,2,3,4,5
  # the paper's conventions: the family allows its own norm placement only, said once, the four curves drawn
  expect 0 "$SANPATH" collapse --model "$M" --tokens 1,2,3,4,5 --conventions paper --format json
  check "$fam collapse --conventions paper" '
assert j["conventions"] == "paper" and len(j["variants"]) == 4, j["variants"]'
  expect 0 "$SANPATH" collapse --model "$M" --tokens 1,2,3,4,5 --conventions paper
  grep -q "allows its own norm placement only" "$dir/out" || fail "$fam paper conventions: $(head -5 "$dir/out")"
  expect 0 "$SANPATH" paths --model "$M" --tokens 1,2,3,4,5 --sums --mlp none --layernorm none
  # every path of the 3-layer stack with skip (3^3), and the top 4 by ||T||_(1,inf), in descending order
  expect 0 "$SANPATH" paths --model "$M" --tokens 1,2,3,4,5 --enumerate --verify-decomposition --skip on --mlp none \
    --layernorm none --format json
  check "$fam paths --enumerate" 'assert len(j["paths"]) == 27, len(j["paths"])'
  cp "$dir/out" "$dir/$fam-all.json"
  expect 0 "$SANPATH" paths --model "$M" --tokens 1,2,3,4,5 --enumerate --top 4 --skip on --mlp none --layernorm none \
    --format json
  /usr/bin/python3 - "$dir/$fam-all.json" "$dir/out" <<'PY' || fail "$fam paths --top 4: not the 4 largest terms"
import json, sys
key = lambda p: float(p["term_norm"]["composite"])
every = sorted(json.load(open(sys.argv[1]))["paths"], key=key, reverse=True)
top = json.load(open(sys.argv[2]))["paths"]
assert [p["heads"] for p in top] == [p["heads"] for p in every[:4]], ([p["heads"] for p in top], every[:4])
PY
  # a batch (--tokens-file): each input's numbers are those of its own run
  printf '1,2,3,4,5\n7,3\n19,0,4,11\n' >"$dir/toks.txt"
  expect 0 "$SANPATH" forward --model "$M" --tokens-file "$dir/toks.txt" --format json
  cp "$dir/out" "$dir/$fam-batch.json"
  for i in 0 1 2; do
    toks=$(sed -n "$((i + 1))p" "$dir/toks.txt")
    expect 0 "$SANPATH" forward --model "$M" --tokens "$toks" --format json
    /usr/bin/python3 - "$dir/$fam-batch.json" "$dir/out" $i <<'PY' || fail "$fam batch input $i differs from its run"
import json, sys
b, one, i = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert b["batch"] == 3 and b["inputs"][i]["layers"] == one["layers"], i
PY
  done
  expect 0 "$SANPATH" paths --model "$M" --tokens 1,2,3,4,5 --skip on --mlp none --layernorm none --effectiveness
  grep -q "^task head: language model (20 tokens)" "$dir/out" || fail "$fam: no LM head: $(grep -m1 'task head' "$dir/out")"
  expect 0 "$SANPATH" bounds --model "$M" --tokens 1,2,3,4,5 --skip off --mlp none --layernorm none
  grep -qi "do not cover" "$dir/out" || fail "$fam bounds: the cubic bounds' coverage is not stated"
  expect 0 "$SANPATH" report --model "$M" --tokens 1,2,3,4,5 --out "$dir/$fam.html" -q
  [ -s "$dir/$fam.html" ] || fail "$fam report: no $dir/$fam.html"
done
# A config.json the definitions do not cover: refused naming the key.
/usr/bin/python3 - "$dir" <<'PY'
import json, sys
p = sys.argv[1] + "/gemma3/config.json"
c = json.load(open(p))
c["rope_scaling"] = {"rope_type": "yarn", "factor": 8.0}
json.dump(c, open(p, "w"))
PY
expect 3 "$SANPATH" forward --model "$dir/gemma3" --tokens 1,2
grep -q "^sanpath: error: $dir/gemma3/config.json: rope_scaling: rope_type 'yarn' is not supported" "$dir/err" ||
  fail "gemma3 yarn: $(cat "$dir/err")"

[ "$fails" -eq 0 ] && echo "query_key_norm_families: ok"
exit "$fails"
