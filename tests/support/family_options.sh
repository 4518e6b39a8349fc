# The small checkpoints of families.md's layouts that the CLI tests write with
# `sanpath init --layout FAMILY "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[FAMILY]}`:
# each family with the options that make it differ (families.md). Sourced by
# families.sh and certified.sh.
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
)
