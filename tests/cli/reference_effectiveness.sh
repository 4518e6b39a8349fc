#!/usr/bin/env bash
# sanpath paths --effectiveness against the independent mpmath reference
# (tests/reference/sanpath_ref.py): for k = 0..L the truncation X_{<=k} = sum_{j<=k} S_j + 1b^T,
# its distance ||X_{<=k} - X^L||_F / ||X^L||_F, and with the real checkpoints' task heads
# (BERT pooler + classifier, GPT-2 ln_f + tied LM head) and with every family's head on a small random
# checkpoint (init --layout, its head drawn by the reference's gen-head) the agreement count and the mean KL,
# each to the digits sanpath says it confirmed, and with --check certified (math.md §10) each enclosure
# containing the reference's value; the reference runs at precision_bits + 128.
# Without the shared checkpoints the script fails when CI is set.
# Usage: bash reference_effectiveness.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"

attn=(--mlp none --layernorm none --effectiveness)
real=$(real_models_dir)
if [ -z "$real" ]; then
  if [ -n "${CI:-}" ]; then
    echo "FAIL: $SHARED/data/real-models is absent (CI is set)"
    exit 1
  fi
  echo "SKIP real checkpoints: $SHARED/data/real-models is absent"
else
  paths_case bert-effectiveness "$real/bert-ticket-classifier" tokens 2,15,27,3,40 --skip on "${attn[@]}"
  paths_case gpt2-effectiveness "$real/gpt2-capp" tokens 1,5,9,13,20,2 --skip on "${attn[@]}"
  paths_case gpt2-effectiveness-san "$real/gpt2-capp" tokens 1,5,9,13 --skip off "${attn[@]}"
  # --check certified (math.md §10): every distance and KL in its printed enclosure, each agreement count's
  # proven-to-possible range around the reference's; at 65 bits the enclosures prove few digits
  PRECISIONS="auto 65" paths_case bert-effectiveness-certified "$real/bert-ticket-classifier" tokens 2,15,27,3,40 \
    --skip on "${attn[@]}" --check certified
  PRECISIONS="auto" paths_case gpt2-effectiveness-certified "$real/gpt2-capp" tokens 1,5,9,13,20,2 --skip on \
    "${attn[@]}" --check certified
  PRECISIONS="128" paths_case gpt2-effectiveness-san-certified "$real/gpt2-capp" tokens 1,5,9,13 --skip off \
    "${attn[@]}" --check certified
  # the head's prediction on the full attention-only output is the reference for k = L: all agree
  out=$WORK/gpt2-effectiveness.auto.json
  if ! "$REF_PY" -c "import json, sys
j = json.load(open('$out'))
last = j['effectiveness'][-1]
sys.exit(0 if last['agree'] == j['head']['predictions'] == 6 else 1)"; then
    echo "FAIL gpt2-effectiveness: agreement at k = L is not 6/6"
    FAILS=$((FAILS + 1))
  fi
fi

make_input x5 5 8 1
make_model e3.safetensors --layers 3 --heads 2 --d-model 8 --seed 4 --std 0.4 --bias-std 0.1 \
  --skip on --mlp none --layernorm none && {
  paths_case e3-effectiveness "$WORK/e3.safetensors" input "$WORK/x5" "${attn[@]}"
  paths_case e3-effectiveness-causal "$WORK/e3.safetensors" input "$WORK/x5" --mask causal "${attn[@]}"
  PRECISIONS="auto 257" paths_case e3-effectiveness-certified "$WORK/e3.safetensors" input "$WORK/x5" \
    --mask causal "${attn[@]}" --check certified
}

# Every family's task head (families.md): the final norm, project_out, the LM head (tied or stored, with its
# bias; Qwen3's untied lm_head, Gemma 3's tied table), ViT's classifier on CLS, Gemma 2's and Gemma 3's final
# soft cap, the sequence classifiers; the T5 encoder has none of its own.
source "$(dirname "$0")/../support/family_options.sh"
ref gen-pixels --out "$WORK/img" --size 8 --seed 3
# The BERT family's sequence classifiers: RoBERTa's dense + tanh and out_proj, DistilBERT's pre_classifier + ReLU,
# ALBERT's pooler (its stack written bare by init: an X input); RoBERTa's tokens avoid its pad_token_id 1.
make_input x5d8 5 8 1
for fam in llama mistral qwen2 qwen3 gemma gemma2 gemma3 xlnet gpt_neox phi opt vit roberta distilbert albert; do
  # shellcheck disable=SC2086
  make_model "$fam" --layout $fam "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[$fam]:-${FAMILY_OPTS[llama]}} || continue
  if ! ref gen-head --model "$WORK/$fam" --seed 7 >"$WORK/$fam.head.log" 2>&1; then
    fail "$fam: gen-head: $(cat "$WORK/$fam.head.log")"
    continue
  fi
  case $fam in
    vit) in=(pixels "$WORK/img") ;;
    albert) in=(input "$WORK/x5d8") ;;
    roberta | distilbert) in=(tokens 0,5,7,3,19) ;;
    *) in=(tokens 1,5,7,3,19) ;;
  esac
  paths_case "$fam-head" "$WORK/$fam" "${in[@]}" --skip on "${attn[@]}"
  PRECISIONS="auto" paths_case "$fam-head-certified" "$WORK/$fam" "${in[@]}" --skip on "${attn[@]}" --check certified
done

ref_finish
