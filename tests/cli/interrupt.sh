#!/usr/bin/env bash
# Ctrl-C: a long forward pass that receives SIGINT stops at its next check
# (between layers and heads), exits with code 130 and the one-line message,
# and leaves neither its --output file nor a temporary file behind. A run
# that finishes before the signal is not what this tests: the run below
# takes minutes, the signal is sent after it started computing.
#
# Usage: bash interrupt.sh <sanpath binary> <shared dir> <tmp dir>
set -uo pipefail

SANPATH=$(realpath "$1")
T=$(realpath -m "$3")/interrupt
rm -rf "$T"
mkdir -p "$T"
pid=""
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$T"' EXIT

fail() {
  echo "FAIL $*"
  exit 1
}

# 400 layers at 4098 bits on 16 tokens: about a minute of work, one layer
# well under a second (also under AddressSanitizer).
M=$T/deep.safetensors
"$SANPATH" init --out "$M" --layers 400 --heads 2 --d-model 16 --d-ff 0 --mlp none --seed 1 || fail "init"

interrupt_run() {  # interrupt_run NAME ARGS...: start, wait, SIGINT, check
  local name=$1
  shift
  local out=$T/$name.json
  local start=$SECONDS
  "$SANPATH" forward --quiet --format json --model "$M" --output "$out" "$@" 2>"$T/stderr" &
  pid=$!
  sleep 2
  kill -0 "$pid" 2>/dev/null || fail "$name: the run ended before the signal: $(cat "$T/stderr")"
  kill -INT "$pid"
  local waited=0
  while kill -0 "$pid" 2>/dev/null && [ $waited -lt 60 ]; do
    sleep 0.2
    waited=$((waited + 1))
  done
  kill -0 "$pid" 2>/dev/null && fail "$name: still running 12 s after SIGINT"
  wait "$pid"
  local code=$?
  pid=""
  local err lines
  err=$(cat "$T/stderr")
  lines=$(wc -l <"$T/stderr")
  [ "$code" = 130 ] || fail "$name: exit code $code, expected 130: $err"
  [ "$lines" = 1 ] || fail "$name: stderr has $lines lines, expected 1: $err"
  [[ $err == "sanpath: error: interrupted: "* ]] || fail "$name: message '$err'"
  if compgen -G "$out*" >/dev/null; then fail "$name: output left behind: $(ls "$out"*)"; fi
  echo "ok   $name: exit 130 after $((SECONDS - start)) s, '$err', no output file"
}

interrupt_run fixed-precision --random-input 16 --precision 4098 --no-confirm
interrupt_run auto-precision --random-input 16 --digits 1200
