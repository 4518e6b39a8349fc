#!/usr/bin/env bash
# The emulated formats (--emulate fp32|bf16|fp16, math.md section 9): the independent numpy reference
# tests/reference/emulate_ref.py, checked on its own (the bit-for-bit comparison with sanpath is
# python/tests/test_emulate_reference.py, through sanpath._sanpath.emulate_trace):
#  - its self-test: rounding to fp32/bf16/fp16 against exact fractions and numpy's conversions
#    (subnormals, ties, overflow), fmaf against exact fractions (ties lost in a double sum included);
#  - its emulated passes of `sanpath init` models (BERT-like post-LN gelu, relu with d_qk != d_v and
#    shared layers, GPT-2 and Llama/Qwen2 folders, every other layout family's folder) and of the real
#    checkpoints against the mpmath
#    reference's exact pass (sanpath_ref.py): fp32 within 1e-5, fp16 within 2e-2, bf16 within 1e-1 of
#    max|X^l| (a missing or misplaced operation shows at the size of the quantity).
# Usage: bash reference_emulate.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"

emu() { "$REF_PY" "$REF_DIR/emulate_ref.py" "$@"; }

# emu_case NAME MODEL (tokens|input) VALUE [variant options]
emu_case() {
  local name=$1 model=$2 kind=$3 value=$4 out t0=$SECONDS
  shift 4
  CASES=$((CASES + 1))
  if out=$(emu against-exact --model "$model" "--$kind" "$value" "$@" 2>&1); then
    echo "ok   $name ($((SECONDS - t0)) s): max_l |X^l_F - X^l| / max|X^l|: $(printf '%s\n' "$out" |
      sed -E 's/^ok +([a-z0-9]+):.* = ([^ ]+) .*/\1 \2/' | paste -sd, - | sed 's/,/, /g')"
  else
    echo "FAIL $name: emulate_ref.py against-exact --model $model --$kind $value $*"
    printf '%s\n' "$out" | sed 's/^/     /'
    FAILS=$((FAILS + 1))
  fi
}

CASES=$((CASES + 1))
if out=$(emu self-test 2>&1); then
  echo "ok   reference self-test: $(printf '%s\n' "$out" | tail -n 1)"
else
  echo "FAIL reference self-test (tests/reference/emulate_ref.py self-test):"
  printf '%s\n' "$out" | sed 's/^/     /'
  FAILS=$((FAILS + 1))
fi

make_input x5d12 5 12 1
make_input x5d8 5 8 2
make_input x5d16 5 16 3

make_model bertlike.safetensors --layers 2 --heads 3 --d-model 12 --d-ff 24 --seed 12 --std 0.3 --bias-std 0.05 &&
  emu_case bertlike "$WORK/bertlike.safetensors" input "$WORK/x5d12" &&
  emu_case bertlike-san "$WORK/bertlike.safetensors" input "$WORK/x5d12" --skip off --mlp none --layernorm none &&
  emu_case bertlike-pre-causal "$WORK/bertlike.safetensors" input "$WORK/x5d12" --layernorm pre --mask causal
make_model relu.safetensors --layers 3 --heads 2 --d-model 8 --d-qk 3 --d-v 5 --d-ff 12 --seed 18 --std 0.4 \
  --bias-std 0.1 --activation relu --skip off --mlp plain --layernorm none --shared-layers &&
  emu_case relu-plain-shared "$WORK/relu.safetensors" input "$WORK/x5d8"
make_model gpt2dir --layout gpt2 --layers 2 --heads 2 --d-model 8 --vocab 20 --seed 16 --std 0.3 --bias-std 0.1 &&
  emu_case gpt2-folder "$WORK/gpt2dir" tokens 3,1,4,1,5
make_model llamadir --layout llama --layers 2 --heads 4 --kv-heads 2 --d-model 16 --d-ff 24 --vocab 20 --seed 17 \
  --std 0.3 &&
  emu_case llama-folder "$WORK/llamadir" input "$WORK/x5d16" &&
  emu_case llama-folder-san "$WORK/llamadir" input "$WORK/x5d16" --skip off --mlp none --layernorm none
make_model qwendir --layout qwen2 --layers 2 --heads 4 --kv-heads 2 --d-model 16 --d-ff 24 --vocab 20 --seed 19 \
  --std 0.3 --bias-std 0.1 &&
  emu_case qwen2-folder "$WORK/qwendir" tokens 3,1,4,1,5

# Every other family (docs/math.md section 9 rules 10-13): XLNet's terms (clamped), T5's bucket bias,
# GPT-NeoX's and Phi's parallel blocks with partial rotary (Phi with gelu_fast), OPT, Gemma, Gemma 2's
# soft cap, sliding window (5 tokens, window 2) and sandwich norms; and their SANs.
. "$(dirname "$0")/../support/family_options.sh"
FAMILY_OPTS[phi]="${FAMILY_OPTS[phi]} --activation gelu_fast"
for fam in xlnet t5 gpt_neox phi opt gemma gemma2; do
  # shellcheck disable=SC2086
  make_model "${fam}dir" --layout $fam "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[$fam]} &&
    emu_case "$fam-folder" "$WORK/${fam}dir" tokens 1,5,7,3,19 &&
    emu_case "$fam-folder-san" "$WORK/${fam}dir" tokens 1,5,7,3,19 --skip off --mlp none --layernorm none
done

real=$(real_models_dir)
if [ -z "$real" ]; then
  echo "SKIP real checkpoints: $SHARED/data/real-models is absent"
else
  emu_case bert-real "$real/bert-ticket-classifier" tokens 2,15,27,3,40
  emu_case gpt2-real "$real/gpt2-capp" tokens 1,5,9,13,20
fi

ref_finish
