#!/usr/bin/env bash
# sanpath paths --effectiveness --rerun N against the independent mpmath reference
# (tests/reference/sanpath_ref.py subnetwork): with N at least every count_k, each path of each length
# is re-run once as its own sub-network (no random draw), so the re-run truncation, its distance to X^L,
# the task head's agreement and KL, and for attention-only variants the gap to the exact X_{<=k} are
# checked to the digits sanpath says it confirmed, for attention-only and full (LayerNorm + MLP)
# variants. Then, with sampled paths (N < count_k): the same JSON at --threads 1 and 3, another seed
# giving other draws, and the option errors.
# Without the shared checkpoints the script fails when CI is set.
# Usage: bash reference_rerun.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"

real=$(real_models_dir)
if [ -z "$real" ]; then
  if [ -n "${CI:-}" ]; then
    echo "FAIL: $SHARED/data/real-models is absent (CI is set)"
    exit 1
  fi
  echo "SKIP real checkpoints: $SHARED/data/real-models is absent"
else
  # BERT: L = 2, H = 4, counts 1, 8, 16; the classifier head.
  paths_case bert-rerun-attention "$real/bert-ticket-classifier" tokens 2,15,27,3 --skip on --mlp none \
    --layernorm none --effectiveness --rerun 16 --repeats 2
  paths_case bert-rerun-own "$real/bert-ticket-classifier" tokens 2,15,27,3 --effectiveness --rerun 16 --repeats 2
  # Certified (--check certified): every repetition's enclosure contains the reference value, the
  # agreement range the reference count.
  PRECISIONS="auto 65" paths_case bert-rerun-attention-certified "$real/bert-ticket-classifier" tokens 2,15,27,3 \
    --skip on --mlp none --layernorm none --effectiveness --rerun 16 --repeats 2 --check certified
  PRECISIONS="auto" paths_case bert-rerun-own-certified "$real/bert-ticket-classifier" tokens 2,15,27,3 \
    --effectiveness --rerun 16 --repeats 2 --check certified
fi

make_input x4 4 8 3
make_model r3.safetensors --layers 3 --heads 2 --d-model 8 --d-ff 16 --seed 5 --std 0.4 --bias-std 0.1 \
  --skip on --mlp residual --layernorm pre --mask causal && {
  # counts 1, 6, 12, 8
  paths_case r3-rerun-pre "$WORK/r3.safetensors" input "$WORK/x4" --effectiveness --rerun 12 --repeats 2
  paths_case r3-rerun-post-plain "$WORK/r3.safetensors" input "$WORK/x4" --layernorm post --mlp plain \
    --effectiveness --rerun 12 --repeats 2
  paths_case r3-rerun-attention-noskip "$WORK/r3.safetensors" input "$WORK/x4" --skip off --mlp none \
    --layernorm none --effectiveness --rerun 8 --repeats 2
  PRECISIONS="128" paths_case r3-rerun-pre-certified "$WORK/r3.safetensors" input "$WORK/x4" --effectiveness \
    --rerun 12 --repeats 2 --check certified

  # Sampled paths: deterministic for a seed at any thread count; another seed draws other paths.
  run() { "$SANPATH" paths --model "$WORK/r3.safetensors" --input "$WORK/x4" --effectiveness --rerun 3 \
    --repeats 4 --precision double --format json -q "$@"; }
  CASES=$((CASES + 1))
  a=$(run --threads 1 --seed 9) && b=$(run --threads 3 --seed 9) && c=$(run --threads 1 --seed 10) || {
    echo "FAIL sampled re-runs: sanpath exited non-zero"; FAILS=$((FAILS + 1)); }
  if [ "$a" != "$b" ]; then echo "FAIL sampled re-runs: --threads 1 and 3 differ"; FAILS=$((FAILS + 1)); fi
  if [ "$a" = "$c" ]; then echo "FAIL sampled re-runs: --seed 9 and 10 agree"; FAILS=$((FAILS + 1)); fi
  "$REF_PY" - "$a" <<'PY' || { echo "FAIL sampled re-runs: JSON"; FAILS=$((FAILS + 1)); }
import json, sys
j = json.loads(sys.argv[1])
rows = j["effectiveness"]
assert [r["paths"] for r in rows] == ["1", "6", "12", "8"], rows
assert [r["paths_run"] for r in rows] == [1, 3, 3, 3] and [r["all_paths"] for r in rows] == [True, False, False, False]
assert all(r["exact"] is None for r in rows) and j["exact"] is False
# four repetitions where paths were drawn, one value where every path ran
assert rows[0]["rerun"]["distance"]["stddev"] is None and rows[1]["rerun"]["distance"]["stddev"] is not None
PY

  expect_usage() {
    CASES=$((CASES + 1))
    local want=$1
    shift
    "$SANPATH" paths --model "$WORK/r3.safetensors" --input "$WORK/x4" "$@" >"$WORK/u.out" 2>"$WORK/u.err"
    local rc=$?
    if [ $rc -ne 2 ] || ! grep -qF -- "$want" "$WORK/u.err" || [ -s "$WORK/u.out" ]; then
      echo "FAIL usage $*: exit $rc, stderr: $(cat "$WORK/u.err")"
      FAILS=$((FAILS + 1))
    fi
  }
  expect_usage "--rerun: only with --effectiveness" --sums --rerun 4
  expect_usage "--rerun: at least 1" --effectiveness --rerun 0
  expect_usage "--repeats" --effectiveness --repeats 3
  expect_usage "--repeats: at least 1" --effectiveness --rerun 4 --repeats 0
  expect_usage "--threads: -1 is not a thread count in [0, 4096] (0: all cores)" --effectiveness --rerun 4 --threads -1
}

ref_finish
