#!/usr/bin/env bash
# sanpath forward on the HuggingFace layout families of shared/docs/families.md
# (xlnet, t5, gpt_neox, phi, opt, gemma, gemma2, vit, qwen3, gemma3) against the independent
# mpmath reference (tests/reference/sanpath_ref.py, written from families.md and
# math.md only): folders written by `sanpath init --layout L` with small sizes and
# the family options, run as trained and as the pure SAN (and a few other
# variants; Gemma 3 also as a gemma3 multimodal file's language model) at
# --precision auto and double; every printed residual and norm must agree with
# the reference to the digits sanpath confirmed. First the reference's own
# self-test (tests/reference/test_families_ref.py).
# Usage: bash reference_families.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"

CASES=$((CASES + 1))
if out=$("$REF_PY" "$REF_DIR/test_families_ref.py" 2>&1); then
  echo "ok   reference self-test: $(printf '%s\n' "$out" | tail -n 1)"
else
  echo "FAIL reference self-test (tests/reference/test_families_ref.py):"
  printf '%s\n' "$out" | sed 's/^/     /'
  FAILS=$((FAILS + 1))
fi

SAN=(--skip off --mlp none --layernorm none)
SIZE=(--layers 2 --heads 2 --d-ff 12 --vocab 20 --std 0.3)   # and --d-model 8 or 16
TOK=1,5,7,3
TOK5=1,5,7,3,19

# fam NAME TOKENS [sanpath init options...]: a folder, run as trained and as the SAN.
fam() {
  local name=$1 toks=$2
  shift 2
  make_model "$name" "$@" || return 1
  forward_case "$name-own" "$WORK/$name" tokens "$toks"
  forward_case "$name-san" "$WORK/$name" tokens "$toks" "${SAN[@]}"
}

# XLNet: bidirectional; uni (= causal) with clamp_len 2 (|i - j| = 3 clamps), plain MLP, no skip.
fam xlnet-bi "$TOK" --layout xlnet "${SIZE[@]}" --d-model 8 --seed 1 &&
  forward_case xlnet-bi-causal-median "$WORK/xlnet-bi" tokens "$TOK" --mask causal --center median
fam xlnet-uni-clamp "$TOK" --layout xlnet "${SIZE[@]}" --d-model 8 --seed 2 \
  --attn-type uni --clamp-len 2 &&
  forward_case xlnet-uni-clamp-plain "$WORK/xlnet-uni-clamp" tokens "$TOK" --skip off --mlp plain

# T5 encoder: d_kv 3 != d/H (--d-qk and --d-v); 12 buckets, max distance 4 (5 tokens: |j - i| = 4 lands in
# bucket 5, resp. 11, by the integer rule); relu and gated-gelu MLPs.
fam t5 "$TOK5" --layout t5 "${SIZE[@]}" --d-model 8 --seed 3 --d-qk 3 --d-v 3 \
  --rel-buckets 12 --rel-max-distance 4 --gated off &&
  forward_case t5-causal-plain "$WORK/t5" tokens "$TOK5" --mask causal --mlp plain
fam t5-gated "$TOK5" --layout t5 "${SIZE[@]}" --d-model 8 --seed 4 --d-qk 4 \
  --rel-buckets 12 --rel-max-distance 4 --gated on

# GPT-NeoX: partial rotary (d 16, d_h 8, fraction 0.5: r = 4, theta_1 = base^(-2/4)) with parallel blocks;
# whole-head rotary (d_h 4), sequential.
fam neox-parallel "$TOK" --layout gpt_neox "${SIZE[@]}" --d-model 16 --seed 5 --rotary-fraction 0.5 \
  --parallel-residual on &&
  forward_case neox-parallel-noskip-nomask "$WORK/neox-parallel" tokens "$TOK" --skip off --mask none
fam neox-sequential "$TOK" --layout gpt_neox "${SIZE[@]}" --d-model 8 --seed 6 --rotary-fraction 1 \
  --parallel-residual off &&
  forward_case neox-sequential-plain "$WORK/neox-sequential" tokens "$TOK" --mlp plain --layernorm none

# Phi: one LayerNorm feeding both parallel branches, multi-query (1 kv head), partial rotary (d_h 8, r 4).
fam phi "$TOK" --layout phi "${SIZE[@]}" --d-model 16 --seed 7 --kv-heads 1 --rotary-fraction 0.5 &&
  forward_case phi-nomlp "$WORK/phi" tokens "$TOK" --mlp none

# OPT: positions offset 2; project_in (embed_dim 6 != d 8) and post-norm; pre-norm with e = d.
fam opt-post-proj "$TOK" --layout opt "${SIZE[@]}" --d-model 8 --seed 8 --embed-dim 6 --pre-norm off &&
  forward_case opt-post-proj-plain "$WORK/opt-post-proj" tokens "$TOK" --mlp plain --mask none
fam opt-pre "$TOK" --layout opt "${SIZE[@]}" --d-model 8 --seed 9 --pre-norm on

# Gemma: sqrt(d) embedding scale, (1 + w) gains, head_dim 6 != d/H (--d-qk and --d-v), multi-query.
fam gemma "$TOK" --layout gemma "${SIZE[@]}" --d-model 8 --seed 10 --kv-heads 1 --d-qk 6 --d-v 6 &&
  forward_case gemma-nomask-plain "$WORK/gemma" tokens "$TOK" --mask none --mlp plain

# Gemma 2: four norms, score scale 9^(-1/2), softcap 0.5, window 2 on layer 0 (4 tokens: rows 2, 3 lose
# keys); and without window and cap.
fam gemma2 "$TOK" --layout gemma2 "${SIZE[@]}" --d-model 8 --seed 11 --kv-heads 1 --d-qk 4 --sliding-window 2 \
  --softcap 0.5 --query-pre-attn-scalar 9 &&
  forward_case gemma2-nomask "$WORK/gemma2" tokens "$TOK" --mask none &&
  forward_case gemma2-noskip "$WORK/gemma2" tokens "$TOK" --skip off
fam gemma2-nowindow "$TOK" --layout gemma2 "${SIZE[@]}" --d-model 8 --seed 12 --kv-heads 2 --d-qk 4 \
  --sliding-window 0 --softcap 0 --query-pre-attn-scalar 4

# Llama (math.md section 8): the rotary, RMSNorm, grouped kv heads and gated MLP pieces the families share.
fam llama "$TOK" --layout llama "${SIZE[@]}" --d-model 8 --seed 14 --kv-heads 1

# Qwen3 and Gemma 3 (families.md, query/key norms): each head's query and key rows normed before the rotary
# (gain w, resp. 1 + w, drawn around 1, resp. 0), as trained and without mask; tests/support/family_options.sh
# says what each model has (Qwen3's four biases and head_dim 6; Gemma 3's local layer 0 with window 2 and base
# 10, global layer 1 with base 1000 and linear factor 4). Without the norm, or with one base for both
# layers, the reference misses sanpath's numbers by far more than their digits (checked by hand).
source "$(dirname "$0")/../support/family_options.sh"
for f in qwen3 gemma3; do
  # shellcheck disable=SC2086
  fam "$f" "$TOK5" --layout $f "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[$f]} &&
    forward_case "$f-nomask-plain" "$WORK/$f" tokens "$TOK5" --mask none --mlp plain
done
# The same Gemma 3 as the language model of a gemma3 (multimodal) file: text_config, tensors under
# language_model.model., a vision tower to ignore.
if "$REF_PY" - "$REF_DIR" "$WORK/gemma3" "$WORK/gemma3-mm" <<'PY'; then
import json, os, sys
sys.path.insert(0, sys.argv[1])
import sanpath_ref as R
src, dst = sys.argv[2], sys.argv[3]
os.makedirs(dst)
_, t = R.read_safetensors(os.path.join(src, "model.safetensors"))
t = {"language_model." + k: v for k, v in t.items()}
t["vision_tower.vision_model.post_layernorm.weight"] = ([3], [1.0, 2.0, 3.0])
R.write_safetensors(os.path.join(dst, "model.safetensors"), t)
text = json.load(open(os.path.join(src, "config.json")))
text["model_type"] = "gemma3_text"
cfg = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": text,
       "image_token_index": 19}
json.dump(cfg, open(os.path.join(dst, "config.json"), "w"))
PY
  forward_case gemma3-multimodal "$WORK/gemma3-mm" tokens 1,5,7,3,18
else
  fail "gemma3-multimodal: could not write the folder"
fi

# ViT: an 8x8 image of 3 channels, patches 4x4: CLS + 4 patch rows; pre-LN, post-LN and causal options.
ref gen-pixels --out "$WORK/pix.safetensors" --channels 3 --size 8 --seed 1
if make_model vit --layout vit --layers 2 --heads 2 --d-model 8 --d-ff 12 --std 0.3 --seed 13 \
  --image-size 8 --patch-size 4 --channels 3; then
  forward_case vit-own "$WORK/vit" pixels "$WORK/pix.safetensors"
  forward_case vit-san "$WORK/vit" pixels "$WORK/pix.safetensors" "${SAN[@]}"
  forward_case vit-post-causal "$WORK/vit" pixels "$WORK/pix.safetensors" --layernorm post --mask causal
fi

ref_finish
