#!/usr/bin/env bash
# sanpath paths (Theorem 2.1, math.md section 4) against the independent mpmath
# reference (tests/reference/sanpath_ref.py): per length k the sum S_k of all path
# terms (||S_k||_F, ||res(S_k)||_{1,inf} with the mean centre, share ||S_k||_F/||X^L||_F,
# exact path counts C(L,k) H^k), and enumerated path terms (||T||_F, ||T||_{1,inf},
# ||res(T)||_{1,inf}, ||res(P_path)||_{1,inf}, the --top selection), each to the digits
# sanpath says it confirmed, the reference running at precision_bits + 128.
# Usage: bash reference_paths.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"
require_command paths

attn=(--mlp none --layernorm none)
real=$(real_models_dir)
if [ -z "$real" ]; then
  echo "SKIP real checkpoints: $SHARED/data/real-models is absent"
else
  paths_case gpt2-sums-skip "$real/gpt2-capp" tokens 1,5,9,13,20 --skip on "${attn[@]}" --sums
  paths_case bert-sums-san "$real/bert-ticket-classifier" tokens 2,15,27,3,40 --skip off "${attn[@]}" --sums
fi

make_input x4d6 4 6 3
make_input x5 5 8 1

make_model h2.safetensors --layers 3 --heads 2 --d-model 6 --seed 4 --std 0.4 --bias-std 0.1 \
  --skip off --mlp none --layernorm none && {
  paths_case h2-sums-san "$WORK/h2.safetensors" input "$WORK/x4d6" --sums
  paths_case h2-sums-skip "$WORK/h2.safetensors" input "$WORK/x4d6" --skip on --sums
  paths_case h2-sums-skip-causal "$WORK/h2.safetensors" input "$WORK/x4d6" --skip on --mask causal --sums
  paths_case h2-enumerate-san "$WORK/h2.safetensors" input "$WORK/x4d6" --enumerate
  paths_case h2-enumerate-skip "$WORK/h2.safetensors" input "$WORK/x4d6" --skip on --enumerate
  PRECISIONS=auto paths_case h2-enumerate-length2-top3 "$WORK/h2.safetensors" input "$WORK/x4d6" \
    --skip on --enumerate --length 2 --top 3
}
# Qwen3 and Gemma 3 from token ids (tests/support/family_options.sh): the query/key norms, each layer's
# rotary and Gemma 3's window shape only the P_h; Qwen3's value and output biases make the 1b^T term
source "$(dirname "$0")/../support/family_options.sh"
for fam in qwen3 gemma3; do
  # shellcheck disable=SC2086
  make_model "$fam" --layout $fam "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[$fam]} || continue
  paths_case "$fam-sums-san" "$WORK/$fam" tokens 1,5,7,3,19 --skip off "${attn[@]}" --sums
  paths_case "$fam-sums-skip" "$WORK/$fam" tokens 1,5,7,3,19 --skip on "${attn[@]}" --sums
  PRECISIONS=auto paths_case "$fam-enumerate-skip-top3" "$WORK/$fam" tokens 1,5,7,3,19 --skip on "${attn[@]}" \
    --enumerate --top 3
done
# a collapsing SAN: zero sums below length L, residual ~1e-96 (513 bits), "< 1e-N" in double
make_model san6.safetensors --layers 6 --heads 2 --d-model 8 --seed 5 --std 0.5 --skip off --mlp none --layernorm none &&
  paths_case san6-sums "$WORK/san6.safetensors" input "$WORK/x5" --sums &&
  paths_case san6-sums-skip "$WORK/san6.safetensors" input "$WORK/x5" --skip on --sums

ref_finish
