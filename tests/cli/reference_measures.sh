#!/usr/bin/env bash
# `sanpath forward --measures` (math.md section 9) against the independent mpmath
# reference (tests/reference/sanpath_ref.py): every layer's mu, svd_residual, cosine,
# stable_rank, effective_rank (and the companions one_minus_cosine,
# stable_rank_minus_one, effective_rank_minus_one), and from layer 1 on
# attention_entropy and first_token_mass, must agree with the reference to the digits
# sanpath confirmed ("< 1e-N": reference < 1e-N), beside the residuals and norms that
# reference_forward.sh checks; each layer prints exactly the measures asked for.
#  - first the reference's own self-test (tests/reference/test_measures_ref.py);
#  - the real checkpoints (own variant and pure SAN, token input), at auto and double;
#  - random `sanpath init` models under every variant option (skip on/off, mlp
#    none/plain/residual, layernorm none/pre/post, mask none/causal), a GPT-2 and a
#    Llama folder (tokens), a subset --measures LIST, a median centre;
#  - a deep pure SAN (n = 4, d = 6, 10 layers) whose layer 10 residual is near
#    1e-32880: the reference runs at about 109,500 bits (X held whole: the
#    cancellation's bits plus sanpath's precision plus 128), and the collapsed layers'
#    svd_residual, one_minus_cosine, stable_rank_minus_one and effective_rank_minus_one
#    must be printed as numbers with >= 15 confirmed digits (math.md: "compute them
#    from R so their digits survive").
# Usage: bash reference_measures.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"

CASES=$((CASES + 1))
if out=$("$REF_PY" "$REF_DIR/test_measures_ref.py" 2>&1); then
  echo "ok   reference self-test: $(printf '%s\n' "$out" | tail -n 1)"
else
  echo "FAIL reference self-test (tests/reference/test_measures_ref.py):"
  printf '%s\n' "$out" | sed 's/^/     /'
  FAILS=$((FAILS + 1))
fi

ALL=(--measures all)
SAN=(--skip off --mlp none --layernorm none)

# (a) the real checkpoints, own architecture and pure SAN, token input, at auto and double.
real=$(real_models_dir)
if [ -z "$real" ]; then
  echo "SKIP real checkpoints: $SHARED/data/real-models is absent"
else
  forward_case bert-own "$real/bert-ticket-classifier" tokens 2,15,27,3,40 "${ALL[@]}"
  forward_case bert-san "$real/bert-ticket-classifier" tokens 2,15,27,3,40 "${SAN[@]}" "${ALL[@]}"
  forward_case gpt2-own "$real/gpt2-capp" tokens 1,5,9,13,20 "${ALL[@]}"
  forward_case gpt2-san "$real/gpt2-capp" tokens 1,5,9,13,20 "${SAN[@]}" "${ALL[@]}"
fi

# (b) random models; inputs X = 1c^T + R written by the reference.
make_input x5 5 8 1
make_input x5d9 5 9 3
make_input x4d12 4 12 4
make_input x4d6 4 6 8

# pure SAN, 6 layers, collapsing to ~1e-86 (auto: 513 bits; double prints bounds)
make_model san6.safetensors --layers 6 --heads 2 --d-model 8 --seed 5 --std 0.5 "${SAN[@]}" &&
  forward_case san6 "$WORK/san6.safetensors" input "$WORK/x5" "${ALL[@]}"

# one model with every weight (biases, MLP, LayerNorms; relu; d_qk != d_v), run under every option value
make_model every.safetensors --layers 2 --heads 3 --d-model 9 --d-qk 2 --d-v 4 --d-ff 12 --seed 11 --std 0.4 \
  --bias-std 0.1 --activation relu --skip off --mlp plain --layernorm none --mask causal && {
  forward_case cor32-causal "$WORK/every.safetensors" input "$WORK/x5d9" "${ALL[@]}"
  forward_case bert-structure "$WORK/every.safetensors" input "$WORK/x5d9" \
    --skip on --mlp residual --layernorm post --mask none "${ALL[@]}"
  forward_case skip-plain-pre-causal "$WORK/every.safetensors" input "$WORK/x5d9" \
    --skip on --mlp plain --layernorm pre --mask causal "${ALL[@]}"
  forward_case san-mlp-post "$WORK/every.safetensors" input "$WORK/x5d9" \
    --skip off --mlp residual --layernorm post --mask none "${ALL[@]}"
  forward_case skip-only "$WORK/every.safetensors" input "$WORK/x5d9" \
    --skip on --mlp none --layernorm none --mask none "${ALL[@]}"
  forward_case paper-san-post-causal "$WORK/every.safetensors" input "$WORK/x5d9" \
    --skip off --mlp none --layernorm post --mask causal "${ALL[@]}"
  forward_case skip-residual-noln "$WORK/every.safetensors" input "$WORK/x5d9" \
    --skip on --mlp residual --layernorm none --mask none "${ALL[@]}"
  forward_case plain-pre-median "$WORK/every.safetensors" input "$WORK/x5d9" \
    --skip off --mlp plain --layernorm pre --mask none --center median "${ALL[@]}"
  # a subset: exactly these two per layer (attention_entropy from layer 1 on)
  forward_case subset "$WORK/every.safetensors" input "$WORK/x5d9" --measures mu,attention_entropy
}

# BERT-shaped, gelu, pre-LN causal variant
make_model bertlike.safetensors --layers 2 --heads 3 --d-model 12 --d-ff 24 --seed 12 --std 0.3 --bias-std 0.05 &&
  forward_case bertlike-own "$WORK/bertlike.safetensors" input "$WORK/x4d12" "${ALL[@]}" &&
  forward_case bertlike-pre-causal "$WORK/bertlike.safetensors" input "$WORK/x4d12" --layernorm pre \
    --mask causal "${ALL[@]}"

# HuggingFace folders from token ids: GPT-2 (pre-LN, causal, gelu_tanh), Llama (RMSNorm, rotary, 2 query
# heads on 1 kv head, SwiGLU)
make_model gpt2dir --layout gpt2 --layers 2 --heads 2 --d-model 8 --vocab 20 --seed 16 --std 0.3 --bias-std 0.1 &&
  forward_case gpt2-folder "$WORK/gpt2dir" tokens 3,1,4,1,5 "${ALL[@]}" &&
  forward_case gpt2-folder-san "$WORK/gpt2dir" tokens 3,1,4,1,5 "${SAN[@]}" "${ALL[@]}"
make_model llamadir --layout llama --layers 2 --heads 2 --kv-heads 1 --d-model 8 --d-ff 12 --vocab 20 --seed 17 \
  --std 0.3 &&
  forward_case llama-folder "$WORK/llamadir" tokens 3,1,4,1,5 "${ALL[@]}"

# (c) deep: layer 10 near 1e-32880; the reference brute-forces at ~109,500 bits
make_model deep.safetensors --layers 10 --heads 2 --d-model 6 --seed 5 --std 0.35 "${SAN[@]}" &&
  forward_case deep "$WORK/deep.safetensors" input "$WORK/x4d6" "${ALL[@]}" && {
  CASES=$((CASES + 1))
  if out=$("$REF_PY" - "$WORK/deep.auto.json" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
L = j["layers"]
assert len(L) == 11, len(L)
last = int(L[10]["relative_residual"].split("e")[1])
assert -34000 < last < -31000, L[10]["relative_residual"]
for rec in L[6:]:           # relative residual below ~1e-400: collapsed
    for k in ("svd_residual", "one_minus_cosine", "stable_rank_minus_one", "effective_rank_minus_one"):
        v, dg = rec["measures"][k], rec["digits_by_quantity"][k]
        assert not v.startswith("<"), (rec["layer"], k, v)
        assert dg is not None and dg >= 15, (rec["layer"], k, v, dg)
m = L[10]["measures"]
print(f"layer 10: svd_residual {m['svd_residual']}, one_minus_cosine {m['one_minus_cosine']}, "
      f"effective_rank_minus_one {m['effective_rank_minus_one']}")
PY
  ); then
    echo "ok   deep: collapsed layers' measures printed as numbers with >= 15 digits; $out"
  else
    echo "FAIL deep: collapsed layers' measures (layers 6..10) must be numbers with >= 15 confirmed digits:"
    printf '%s\n' "$out" | tail -5 | sed 's/^/     /'
    FAILS=$((FAILS + 1))
  fi
}

ref_finish
