#!/usr/bin/env bash
# The README's first command in the test build, run by scripts/test before
# the full build: the tiers it compiles (SANPATH_TIERS=128,257), the CLI
# alone, and the main job. Then, once the full build is done
# (`tests/first_command.sh compare BUILD OUT`), the main job's output of the
# full build must equal the cut build's byte for byte: the cut changes what
# is compiled, never what the main job prints.
#   tests/first_command.sh build BUILD OUT [cmake options...]
#   tests/first_command.sh compare BUILD OUT
set -euo pipefail
mode=$1 build=$2 out=$3
shift 3
fail() { echo "first_command: $*" >&2; exit 1; }
case "$mode" in
  build)
    cmake -S . -B "$build" "$@" -DSANPATH_TIERS=128,257 >/dev/null
    cmake --build "$build" -j"$(nproc)" --target sanpath_cli
    "$build/sanpath" collapse >"$out"
    grep -q "digits confirmed by a run at 257 bits" "$out" || fail "the main job's table lacks its confirmation: $out"
    "$build/sanpath" --version | grep -q "^multiprecision tiers: 128, 257 bits (built with -DSANPATH_TIERS=128,257;" ||
      fail "--version does not name the tiers 128, 257"
    # A precision above the cut is refused, naming the option that adds it.
    rc=0
    msg=$("$build/sanpath" collapse --precision 513 2>&1 >/dev/null) || rc=$?
    [ "$rc" -eq 2 ] || fail "--precision 513 above the cut exited $rc, not 2"
    case "$msg" in
      *"513 bits is above this build's top tier of 257 bits"*"-DSANPATH_TIERS=all"*) ;;
      *) fail "--precision 513 above the cut: unexpected message: $msg" ;;
    esac
    ;;
  compare)
    "$build/sanpath" collapse | cmp -s - "$out" ||
      fail "the full build's main job differs from the cut build's ($out)"
    ;;
  *) fail "unknown mode '$mode'" ;;
esac
