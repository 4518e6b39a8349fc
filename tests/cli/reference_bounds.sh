#!/usr/bin/env bash
# sanpath bounds (math.md section 5) against the independent mpmath reference
# (tests/reference/sanpath_ref.py): beta_{l,h} = ||W_QK||_1 ||W_h||_{1,inf} and its parts,
# beta_l, lambda_l, a and a_l, the contraction radius, the theorem chosen, log10 of the
# uniform and layerwise bounds per depth (exact integer exponents (3^l - 1)/2 and 3^l), the
# measured enclosures of r_l against certified facts, the cubic constant, the order and the
# verdicts. The reference runs at precision_bits + 128.
# Usage: bash reference_bounds.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"
require_command bounds

san=(--skip off --mlp none --layernorm none)
real=$(real_models_dir)
if [ -z "$real" ]; then
  echo "SKIP real checkpoints: $SHARED/data/real-models is absent"
else
  bounds_case bert-san "$real/bert-ticket-classifier" tokens 2,15,27,3,40 "${san[@]}"
  bounds_case gpt2-san "$real/gpt2-capp" tokens 1,5,9,13,20 "${san[@]}"
  PRECISIONS=auto bounds_case gpt2-own-not-applicable "$real/gpt2-capp" tokens 1,5,9,13,20
fi

make_input x4d6 4 6 3
make_input x4d6-small 4 6 3 F64 0.1
# Theorem 2.2 (one head), a contracting case
make_model h1.safetensors --layers 3 --heads 1 --d-model 6 --seed 3 --std 0.3 "${san[@]}" &&
  bounds_case thm22 "$WORK/h1.safetensors" input "$WORK/x4d6-small" &&
  PRECISIONS=auto bounds_case thm22-gamma "$WORK/h1.safetensors" input "$WORK/x4d6-small" --gamma 0.5
# Theorem 2.3 (two heads, biases), vacuous
make_model h2.safetensors --layers 3 --heads 2 --d-model 6 --seed 4 --std 0.4 --bias-std 0.1 "${san[@]}" &&
  bounds_case thm23 "$WORK/h2.safetensors" input "$WORK/x4d6"
# Corollary 3.2 (plain MLP, gelu_tanh)
make_model plain.safetensors --layers 3 --heads 2 --d-model 6 --d-ff 8 --seed 7 --std 0.2 --bias-std 0.05 \
  --skip off --mlp plain --layernorm none --activation gelu_tanh &&
  bounds_case cor32 "$WORK/plain.safetensors" input "$WORK/x4d6"

# the counterexample search's saved best model and input, re-checked as its output suggests
if "$SANPATH" bounds --help 2>/dev/null | grep -q -- '--search'; then
  if "$SANPATH" bounds --search --layers 2 --heads 1 --d-model 4 --d-qk 2 --tokens-n 4 --seed 1 --iterations 50 \
    --save "$WORK/best.safetensors" -q >"$WORK/search.log" 2>&1; then
    bounds_case search-best "$WORK/best.safetensors" input "$WORK/best.input.safetensors"
  else
    echo "FAIL search: sanpath bounds --search ... --save exited non-zero:"
    cat "$WORK/search.log"
    FAILS=$((FAILS + 1))
  fi
fi

ref_finish
