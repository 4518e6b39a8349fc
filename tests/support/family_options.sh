# The small checkpoints of families.md's layouts that the CLI tests write with
# `sanpath init --layout FAMILY "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[FAMILY]}`:
# each family with the options that make it differ (families.md). Sourced by
# families.sh, certified.sh and the reference_*.sh scripts. Qwen3: head_dim 6
# (not d/H), q, k, v and o biases, a small rotary base; Gemma 3: pattern 2
# (layer 0 slides with window 2 and base 10, layer 1 attends fully with base
# 1000 and linear factor 4), the score scale 5^(-1/2).
# shellcheck disable=SC2034
FAMILY_SIZE=(--layers 2 --heads 2 --d-model 8 --d-ff 12 --std 0.3 --seed 5)
declare -A FAMILY_OPTS=(
  [xlnet]="--vocab 20 --clamp-len 3"
  [t5]="--vocab 20 --d-qk 3 --d-v 3 --gated on --rel-buckets 8 --rel-max-distance 6"
  [gpt_neox]="--vocab 20 --rotary-fraction 0.5"
  [phi]="--vocab 20 --kv-heads 1 --bias-std 0.1"
  [opt]="--vocab 20 --embed-dim 6 --max-positions 16 --bias-std 0.1"
  [gemma]="--vocab 20 --kv-heads 1 --d-qk 6 --d-v 6"
  [gemma2]="--vocab 20 --d-qk 4 --d-v 4 --sliding-window 2 --softcap 5 --query-pre-attn-scalar 3"
  [vit]="--image-size 8 --patch-size 4 --channels 3 --bias-std 0.1"
  [llama]="--vocab 20 --kv-heads 1"
  [qwen3]="--vocab 20 --kv-heads 1 --head-dim 6 --rope-theta 100 --bias-std 0.1"
  [gemma3]="--vocab 20 --kv-heads 1 --head-dim 4 --layer-pattern 2 --sliding-window 2 --rope-local-base 10
    --rope-theta 1000 --rope-linear-factor 4 --query-pre-attn-scalar 5"
  [roberta]="--vocab 20"
  [distilbert]="--vocab 20"
  [albert]="--shared-layers"  # written without embeddings: an X input
)
