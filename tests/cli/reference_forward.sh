#!/usr/bin/env bash
# sanpath forward against the independent mpmath reference of docs/math.md
# (tests/reference/sanpath_ref.py): every layer's residual (1, inf, composite,
# Frobenius), norms and relative residual must agree with the reference, computed
# at sanpath's precision_bits + 128 bits, to the digits sanpath says it confirmed;
# a value printed "< 1e-N" must have reference < 1e-N.
# Usage: bash reference_forward.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"

# (a) the real checkpoints, own architecture and pure SAN, at auto and double.
real=$(real_models_dir)
if [ -z "$real" ]; then
  echo "SKIP real checkpoints: $SHARED/data/real-models is absent"
else
  san=(--skip off --mlp none --layernorm none)
  forward_case bert-own "$real/bert-ticket-classifier" tokens 2,15,27,3,40
  forward_case bert-san "$real/bert-ticket-classifier" tokens 2,15,27,3,40 "${san[@]}"
  forward_case gpt2-own "$real/gpt2-capp" tokens 1,5,9,13,20
  forward_case gpt2-san "$real/gpt2-capp" tokens 1,5,9,13,20 "${san[@]}"
  # the paper's Section 4 surgery (SAN+MLP) on BERT, median centre
  forward_case bert-san-mlp "$real/bert-ticket-classifier" tokens 7,100,423,0 \
    --skip off --mlp residual --layernorm post --center median
fi

# (b) random models from `sanpath init`; inputs X = 1c^T + R written by the reference
# (sanpath's own --random-input cannot be recomputed: its X^0 is not exported).
make_input x5 5 8 1
make_input x6f32 6 8 2 F32
make_input x5f16 5 8 6 F16
make_input x5bf16 5 8 7 BF16
make_input x5d9 5 9 3
make_input x4d12 4 12 4
make_input x7d6 7 6 5

# pure SAN, collapsing to ~1e-86 (auto needs 513 bits; double prints "< 1e-12")
make_model san6.safetensors --layers 6 --heads 2 --d-model 8 --seed 5 --std 0.5 --skip off --mlp none --layernorm none &&
  forward_case san6-mean "$WORK/san6.safetensors" input "$WORK/x5" &&
  forward_case san6-median-even-n-f32 "$WORK/san6.safetensors" input "$WORK/x6f32" --center median &&
  PRECISIONS=auto forward_case san6-f16-input "$WORK/san6.safetensors" input "$WORK/x5f16" &&
  PRECISIONS=auto forward_case san6-bf16-input "$WORK/san6.safetensors" input "$WORK/x5bf16"

# deeper: ~1e-874 at layer 8 (auto needs 4098 bits; the reference runs at 4226)
make_model san8.safetensors --layers 8 --heads 2 --d-model 8 --seed 5 --std 0.5 --skip off --mlp none --layernorm none &&
  forward_case san8-mean "$WORK/san8.safetensors" input "$WORK/x5"

# causal mask + plain MLP (Corollary 3.2's variant), relu, biases, d_qk != d_v
make_model causal-plain.safetensors --layers 3 --heads 3 --d-model 9 --d-qk 2 --d-v 4 --d-ff 12 --seed 11 \
  --std 0.4 --bias-std 0.1 --activation relu --skip off --mlp plain --layernorm none --mask causal &&
  forward_case causal-plain "$WORK/causal-plain.safetensors" input "$WORK/x5d9" &&
  forward_case causal-plain-as-bert "$WORK/causal-plain.safetensors" input "$WORK/x5d9" \
    --skip on --mlp residual --layernorm post --mask none --center median

# the default BERT-shaped structure (skip on, mlp residual, post-LN), gelu, biases
make_model bertlike.safetensors --layers 2 --heads 3 --d-model 12 --d-ff 24 --seed 12 --std 0.3 --bias-std 0.05 &&
  forward_case bertlike-own "$WORK/bertlike.safetensors" input "$WORK/x4d12" &&
  forward_case bertlike-pre-causal "$WORK/bertlike.safetensors" input "$WORK/x4d12" --layernorm pre --mask causal &&
  PRECISIONS="257 1025" forward_case bertlike-skip-nomlp "$WORK/bertlike.safetensors" input "$WORK/x4d12" \
    --mlp none --layernorm none

# ALBERT-style shared layers, pre-LN, gelu_tanh; own and the SAN+MLP surgery
make_model shared.safetensors --layers 4 --heads 2 --d-model 6 --d-ff 10 --seed 13 --std 0.5 --bias-std 0.1 \
  --shared-layers --activation gelu_tanh --layernorm pre &&
  forward_case shared-pre "$WORK/shared.safetensors" input "$WORK/x7d6" &&
  forward_case shared-san-mlp "$WORK/shared.safetensors" input "$WORK/x7d6" --skip off --mlp residual --layernorm post

# token input: native embeddings, and an init-written HuggingFace BERT folder
make_model emb.safetensors --layers 2 --heads 2 --d-model 8 --d-ff 0 --mlp none --vocab 30 --max-positions 16 \
  --seed 14 --std 0.5 --bias-std 0.1 --mask causal &&
  forward_case native-embeddings "$WORK/emb.safetensors" tokens 3,1,4,1,5,9,2
make_model bertdir --layout bert --layers 2 --heads 2 --d-model 8 --vocab 20 --seed 15 --std 0.3 --bias-std 0.1 \
  --activation relu &&
  forward_case hf-bert-folder "$WORK/bertdir" tokens 0,19,7,7 &&
  forward_case hf-bert-folder-san "$WORK/bertdir" tokens 0,19,7,7 --skip off --mlp none --layernorm none

ref_finish
