#!/usr/bin/env bash
# `sanpath forward --check certified` (math.md §10) on every family of
# families.md, against the independent mpmath reference
# (tests/reference/sanpath_ref.py check-forward): every printed number agrees
# with the reference to the digits it claims as proven, and every layer's
# "intervals" contain the reference's exact value. The same enclosure code
# runs under the sanitizers in test_enclosure (a Llama against mpmath; XLNet,
# T5, Gemma 2's soft cap, partial rotary and ViT's pixels against a 4,098-bit
# pass; ALBERT's, OPT's and Gemma's embeddings), so this script, whose time
# is the reference's, runs in the normal pass only (label `once`).
# Usage: bash certified_families.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"

# every family of families.md from token ids (ViT's pixels below), as trained (its own structure): rotary
# positions (full, with grouped-query attention; partial), parallel blocks, RMSNorm and SwiGLU/GeGLU, XLNet's
# relative attention (clamped), T5's bucket bias, Gemma's √d embedding and unit-offset RMSNorm, Gemma 2's soft
# cap, sandwich norms and sliding window, OPT's projected embedding (ALBERT's, which init does not write: in
# test_enclosure), Qwen3's and Gemma 3's query/key norms, Gemma 3's rotary base and linear factor per layer
source "$(dirname "$0")/../support/family_options.sh"
for fam in llama xlnet t5 gpt_neox phi opt gemma gemma2 qwen3 gemma3; do
  # shellcheck disable=SC2086
  make_model "fam-$fam" --layout $fam "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[$fam]} &&
    PRECISIONS="auto" forward_case "$fam-tokens" "$WORK/fam-$fam" tokens 1,5,7,3,19,2 --check certified
done
# ViT from pixels: each patch entry's sum of products within γ_{C·p²+2} of the terms' magnitudes
ref gen-pixels --out "$WORK/pix.safetensors" --channels 3 --size 8 --seed 1
# shellcheck disable=SC2086
make_model vit --layout vit "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[vit]} &&
  PRECISIONS="auto 128" forward_case vit-pixels "$WORK/vit" pixels "$WORK/pix.safetensors" --check certified
# the pure SAN of a rotary family: the positions alone keep it from collapsing to one row (math.md §8)
PRECISIONS="257" forward_case llama-san "$WORK/fam-llama" tokens 1,5,7,3,19,2 --check certified \
  --skip off --mlp none --layernorm none

# deep SANs of 8 layers through the centred balls (math.md §10: every family's attention on intervals):
# rotary with query/key norms (Qwen3, Gemma 3's window and bases per layer), partial rotary (GPT-NeoX),
# XLNet's relative terms and T5's bucket bias without a mask, Gemma 2's soft cap biting (cap 5) with its
# window: every printed digit against the reference, and 30 digits at least at every layer (measured at
# 257 bits, least at layer 8: 34 for T5 and 48 for XLNet, where the direct balls keep 15 and 39; 51 to 63
# for the others)
for fam in qwen3 gemma3 gpt_neox xlnet t5 gemma2; do
  # shellcheck disable=SC2086
  make_model "deep-$fam" --layout $fam --layers 8 --heads 2 --d-model 8 --d-ff 12 --std 0.8 --seed 5 \
    ${FAMILY_OPTS[$fam]} &&
    PRECISIONS="257" forward_case "$fam-deep-san" "$WORK/deep-$fam" tokens 1,5,7,3,19,2 --check certified --method centred \
      --skip off --mlp none --layernorm none
  CASES=$((CASES + 1))
  "$REF_PY" -c "import json, sys; j = json.load(open(sys.argv[1])); least = min(r['digits'] for r in j['layers']); \
assert j['method'] == 'centred' and least >= int(sys.argv[2]), (j['method'], [r['digits'] for r in j['layers']])" \
    "$WORK/$fam-deep-san.257.json" 30 || fail "$fam-deep-san: the centred balls keep 30 digits at every layer"
done

# the two TinyStories Llamas as trained (rotary, 8 query heads on 4 kv heads, RMSNorm, SwiGLU), by the direct
# pass: at least the 20 digits asked proven at every layer
real="$SHARED/data/real-models"
if [ ! -d "$real/llama-stories260k" ]; then
  if [ -n "${CI:-}" ]; then fail "no real Llama checkpoints in $real (CI is set)"; else echo "SKIP: no real Llama checkpoints"; fi
else
  for m in llama-stories260k llama-tinystories-xs; do
    PRECISIONS="auto" forward_case "$m" "$real/$m" tokens 1,403,407,261,378,432,383,286 --check certified
    CASES=$((CASES + 1))
    "$REF_PY" -c "import json, sys; j = json.load(open(sys.argv[1])); \
assert not j['ceiling_reached'] and min(r['digits'] for r in j['layers']) >= 20, [r['digits'] for r in j['layers']]" \
      "$WORK/$m.auto.json" || fail "$m: 20 proven digits at every layer"
  done
fi

ref_finish
