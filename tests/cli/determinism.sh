#!/usr/bin/env bash
# Determinism: the same command writes byte-identical JSON on every run and
# whatever the thread count: 1, 2 or 3 threads (--threads), one CPU or all
# of them (taskset), OMP_NUM_THREADS 1 or 2,
# and every instruction-set level of the double kernel (SANPATH_ISA).
# Covers forward, and paths/bounds when this sanpath has those commands.
#
# Usage: bash determinism.sh <sanpath binary> <shared dir> <tmp dir>
set -uo pipefail

source "$(dirname "$0")/../support/cli.sh"
cli_workdir determinism "$@"

count=0
failed=0

# The ways to run one command: name and prefix (env/taskset); the thread
# option is added per command when it exists.
cpus=$(nproc)
runners=("plain|" "again|" "omp1|env OMP_NUM_THREADS=1" "omp2|env OMP_NUM_THREADS=2")
# The double kernel's instruction-set levels this CPU runs (SANPATH_ISA).
runners+=("isa-generic|env SANPATH_ISA=generic")
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && runners+=("isa-avx2|env SANPATH_ISA=avx2")
grep -qw avx512f /proc/cpuinfo && runners+=("isa-avx512|env SANPATH_ISA=avx512")
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then
  runners+=("one-cpu|taskset -c 0")
  [ "$cpus" -ge 2 ] && runners+=("two-cpus|taskset -c 0,1")
fi

has_option() {  # has_option <command> <option>
  "$SANPATH" "$1" --help 2>/dev/null | grep -q -- "$2"
}

# same NAME COMMAND ARGS...: runs `sanpath COMMAND ARGS --format json
# --output FILE` in every way and requires identical bytes.
same() {
  local name=$1 cmd=$2
  shift 2
  local variants=()
  if [ "${THREADS_ONLY:-0}" = 1 ]; then
    variants+=("plain||")  # the thread counts alone (the wide runs are the slow ones)
  else
    for r in "${runners[@]}"; do variants+=("$r|"); done
  fi
  if has_option "$cmd" --threads; then
    variants+=("threads1||--threads 1" "threads2||--threads 2" "threads3||--threads 3")
  fi
  local ref="" refname="" problems=() runs=0
  for v in "${variants[@]}"; do
    IFS='|' read -r vname prefix extra <<<"$v"
    local out=$T/$name.$vname.json
    # shellcheck disable=SC2086
    $prefix "$SANPATH" "$cmd" "$@" $extra --quiet --format json --output "$out" 2>"$T/stderr"
    local code=$?
    if [ -n "$extra" ] && [ $code -eq 2 ] && grep -q -- "--threads" "$T/stderr"; then
      continue  # this mode has no --threads (e.g. paths --sums): nothing to vary
    fi
    if [ $code -ne 0 ]; then
      problems+=("$vname: exit code $code: $(head -c 300 "$T/stderr")")
      continue
    fi
    runs=$((runs + 1))
    if [ -z "$ref" ]; then
      ref=$out
      refname=$vname
    elif ! cmp -s "$ref" "$out"; then
      problems+=("$vname differs from $refname: $(diff "$ref" "$out" | head -4 | tr '\n' ' ')")
    fi
  done
  count=$((count + 1))
  if [ ${#problems[@]} -eq 0 ] && [ -n "$ref" ]; then
    printf 'ok   %-36s %d runs, %s bytes each\n' "$name" "$runs" "$(stat -c %s "$ref")"
  else
    failed=$((failed + 1))
    printf 'FAIL %s\n' "$name"
    for p in "${problems[@]}"; do printf '       - %s\n' "$p"; done
  fi
}

# repeated NAME TIMES COMMAND ARGS...: runs the command at --threads 1, then
# TIMES times at --threads 3, and requires identical bytes every time. For
# races that show only now and then: the rounding check's three passes once
# met Boost's lazily filled numeric_limits of an MPFR tier at the same
# moment, and about one run in seven printed garbage spectral measures.
repeated() {
  local name=$1 times=$2 cmd=$3
  shift 3
  local ref=$T/$name.ref.json out=$T/$name.json bad=0 i
  "$SANPATH" "$cmd" "$@" --threads 1 --quiet --format json --output "$ref" 2>"$T/stderr" || bad=1
  for i in $(seq 1 "$times"); do
    [ "$bad" = 0 ] || break
    "$SANPATH" "$cmd" "$@" --threads 3 --quiet --format json --output "$out" 2>"$T/stderr" && cmp -s "$ref" "$out" ||
      bad=$i
  done
  count=$((count + 1))
  if [ "$bad" = 0 ]; then
    printf 'ok   %-36s %d runs at 3 threads, as at 1\n' "$name" "$times"
  else
    failed=$((failed + 1))
    printf 'FAIL %s: run %s differs or failed: %s\n' "$name" "$bad" "$(head -c 300 "$T/stderr")"
  fi
}

M=$T/m.safetensors
"$SANPATH" init --out "$M" --layers 3 --heads 2 --d-model 8 --vocab 30 --seed 4 || exit 1
SAN=$T/san.safetensors
"$SANPATH" init --out "$SAN" --layers 3 --heads 3 --d-model 12 --skip on --mlp none --layernorm none --seed 5 || exit 1

echo "== forward"
same forward-native-auto forward --model "$M" --random-input 6 --seed 2
same forward-native-double forward --model "$M" --tokens 1,5,7,29,3 --precision double
same forward-san-optimal-centre forward --model "$SAN" --random-input 5 --center optimal --precision 128
# Wide enough for every parallel section to split (core/linalg: multiprecision
# products of 64·128·128 = 2^20 multiply-adds, double ones of 64·128·512 =
# 2^22; four heads at once): the same bytes at 1, 2 and 3 threads.
WIDE=$T/wide.safetensors
"$SANPATH" init --out "$WIDE" --layers 2 --heads 4 --d-model 128 --d-ff 512 --vocab 30 --seed 8 || exit 1
THREADS_ONLY=1 same forward-wide-auto forward --model "$WIDE" --random-input 64 --seed 2
THREADS_ONLY=1 same forward-wide-double forward --model "$WIDE" --random-input 64 --seed 2 --precision double
THREADS_ONLY=1 same forward-wide-san-direct forward --model "$WIDE" --random-input 64 --seed 2 --skip off --mlp none --layernorm none \
  --precision 513
PURE=$T/pure.safetensors
"$SANPATH" init --out "$PURE" --layers 3 --heads 2 --d-model 8 --skip off --mlp none --layernorm none --seed 4 || exit 1
repeated forward-double-measures-repeated 40 forward --model "$PURE" --random-input 6 --seed 1 --precision double \
  --measures all
source "$(dirname "$0")/../support/shared.sh"
have_real=0
require_shared_in_ci "$REAL" && have_real=1
if [ "$have_real" = 1 ]; then
  same forward-real-bert forward --model "$REAL/bert-ticket-classifier" --tokens 2,15,27,3,9
  same forward-real-gpt2-as-san forward --model "$REAL/gpt2-capp" --tokens 1,2,3,4 --skip off --mlp none \
    --layernorm none --precision 257
fi

has_command() { "$SANPATH" --help 2>/dev/null | grep -Eq "^ +$1( |$)"; }
if has_command paths; then
  echo "== paths"
  # 4^5 = 1024 paths: enough subtrees for two workers to share the work.
  DEEP=$T/deep.safetensors
  "$SANPATH" init --out "$DEEP" --layers 5 --heads 3 --d-model 6 --skip on --mlp none --layernorm none --seed 7 ||
    exit 1
  same paths-enumerate paths --model "$DEEP" --random-input 5 --seed 3 --enumerate
  same paths-enumerate-top paths --model "$SAN" --random-input 5 --seed 3 --enumerate --top 7 --precision 257
  same paths-sums paths --model "$SAN" --random-input 5 --seed 3 --sums
  same paths-sample paths --model "$SAN" --random-input 5 --seed 3 --sample 20
  [ "$have_real" = 1 ] && same paths-real-gpt2-sums paths --model "$REAL/gpt2-capp" --tokens 1,5,9,13 --skip on --mlp none \
    --layernorm none --sums
else
  echo "skip paths: this sanpath has no 'paths' command"
fi
if has_command bounds; then
  echo "== bounds"
  NOSKIP=$T/noskip.safetensors
  "$SANPATH" init --out "$NOSKIP" --layers 3 --heads 2 --d-model 8 --skip off --mlp none --layernorm none --seed 6 ||
    exit 1
  same bounds-auto bounds --model "$SAN" --random-input 5 --seed 3
  same bounds-theorem-2.3 bounds --model "$NOSKIP" --random-input 5 --seed 3 --theorem 2.3
else
  echo "skip bounds: this sanpath has no 'bounds' command"
fi

echo "$count commands, $failed not deterministic"
[ "$failed" -eq 0 ]
