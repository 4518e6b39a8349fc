#!/usr/bin/env bash
# sanpath forward --center optimal against certified facts computed by the mpmath
# reference (tests/reference/sanpath_ref.py). math.md section 3: the optimal
# composite residual is enclosed by [lower, upper] with
#   lower = sqrt(min_c ||X - 1c^T||_1 * min_c ||X - 1c^T||_inf),
#   upper = the least composite over candidate centres (mean, median, inf-optimal, refinement).
# The reference knows min_c||.||_1 exactly (median centre) and encloses min_c||.||_inf
# in [max_ik ||x_i - x_k||_1 / 2, min(mean, median centre)], so it checks: lower inside
# the resulting range, upper between that range's low end and the mean/median composites,
# composite = sqrt(one * inf), and the norms of X to the confirmed digits.
# Usage: bash reference_optimal.sh <sanpath binary> <shared dir> <tmp dir>
set -u
. "$(dirname "$0")/../reference/lib.sh"
ref_init "$@"

# X = the 3x3 identity below a zero row: min_c||.||_1 = 1 (median 0), min_c||.||_inf = 1
# (c = 0 gives 1; rows 2 and 3 are 2 apart in the 1-norm), so lower = upper = 1 exactly.
REF_DIR=$REF_DIR "$REF_PY" -c '
import os, sys
sys.path.insert(0, os.environ["REF_DIR"])
import sanpath_ref as r
r.write_safetensors(sys.argv[1], {"X": ([4, 3], [0., 0., 0., 1., 0., 0., 0., 1., 0., 0., 0., 1.])})
' "$WORK/identity.safetensors"
make_model one-layer.safetensors --layers 1 --heads 1 --d-model 3 --seed 1 --skip off --mlp none --layernorm none &&
  PRECISIONS=auto forward_case identity-point-enclosure "$WORK/one-layer.safetensors" input "$WORK/identity.safetensors" \
    --center optimal

make_input x6f32 6 8 2 F32
make_model san6.safetensors --layers 6 --heads 2 --d-model 8 --seed 5 --std 0.5 --skip off --mlp none --layernorm none &&
  forward_case san6-optimal "$WORK/san6.safetensors" input "$WORK/x6f32" --center optimal

ref_finish
