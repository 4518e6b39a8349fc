#!/usr/bin/env bash
# MPI: the same binary under `mpirun -np 2` shares the inputs of a batch over
# two ranks, and rank 0 writes exactly what one process writes, byte for byte
# (stdout and --output files), for forward (certified too), collapse, paths (--sums,
# --effectiveness, --rerun), bounds and report batches, on a random model
# and on a real checkpoint, and for the path shards of one input (paths
# --enumerate, --top, --sample); Qwen3 and Gemma 3 batches too. stderr gets one `mpi: 2 ranks, ...` line
# per shared batch or path job. An error of an input that rank 1 computes ends the job with
# one process's message and exit code, printed once; so does a bad token
# line; a failed job leaves no output file; Ctrl-C on mpirun ends every rank.
#
# Needs Open MPI (scripts/install-deps) and a sanpath built with it: fails
# otherwise.
#
# Usage: bash mpi.sh <sanpath binary> <shared dir> <tmp dir>
set -uo pipefail

source "$(dirname "$0")/../support/cli.sh"
cli_checks mpi "$@"
ok() { echo "ok: $*"; }

if ! command -v mpirun >/dev/null; then
  echo "FAIL: mpirun not found (scripts/install-deps installs openmpi-bin)" >&2
  exit 1
fi
if ! "$SANPATH" --version | grep -q "^MPI: Open MPI"; then
  echo "FAIL: this sanpath was built without MPI: $("$SANPATH" --version | grep MPI)" >&2
  exit 1
fi
# Root may run mpirun in a container; two ranks on any machine.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun -np 2 --oversubscribe)

"$SANPATH" init --out "$T/m" --layout bert --layers 2 --heads 2 --d-model 16 --d-ff 32 --vocab 50 --std 0.3 \
  --seed 1 >/dev/null 2>&1 || fail "init"
printf '1,2,3\n4,5,6,7,8\n9,10\n11,12,13,14,15,16,17\n18,19,20,21\n' >"$T/tokens.txt"

# same NAME ARGS...: `sanpath ARGS` alone and under mpirun -np 2: identical
# stdout, identical --output file, exit 0, and the mpi line on stderr
# (NOTE, a grep pattern: by default the line of the 5-input batches).
NOTE="^mpi: 2 ranks, 5 inputs round robin (rank 0: 3 in .* s, rank 1: 2 in .* s)"
same() {
  local name=$1
  shift
  "$SANPATH" "$@" --output "$T/one.out" >"$T/one.stdout" 2>"$T/one.err"
  local c1=$?
  "${MPIRUN[@]}" "$SANPATH" "$@" --output "$T/two.out" >"$T/two.stdout" 2>"$T/two.err"
  local c2=$?
  if [ $c1 != 0 ] || [ $c2 != 0 ]; then
    fail "$name: exit $c1 alone, $c2 under mpirun: $(head -c 300 "$T/one.err") $(head -c 600 "$T/two.err")"
  elif ! cmp -s "$T/one.out" "$T/two.out"; then
    fail "$name: the output file differs under mpirun -np 2: $(diff "$T/one.out" "$T/two.out" | head -5)"
  elif ! cmp -s "$T/one.stdout" "$T/two.stdout"; then
    fail "$name: stdout differs under mpirun -np 2"
  elif ! grep -q "$NOTE" "$T/two.err"; then
    fail "$name: no mpi line on stderr: $(head -c 600 "$T/two.err")"
  else
    ok "$name: 2 ranks = 1 process, $(wc -c <"$T/one.out") bytes; $(grep '^mpi:' "$T/two.err" | head -1)"
  fi
}

TOK=(--model "$T/m" --tokens-file "$T/tokens.txt" -q)
same "forward table" forward "${TOK[@]}"
same "forward json, measures" forward "${TOK[@]}" --measures all --format json
same "forward double json" forward "${TOK[@]}" --precision double --format json
same "collapse json" collapse "${TOK[@]}" --conventions paper --format json
same "collapse csv" collapse "${TOK[@]}" --format csv
same "paths --sums" paths "${TOK[@]}" --skip on --mlp none --layernorm none --sums --format json
same "paths --effectiveness" paths "${TOK[@]}" --skip on --mlp none --layernorm none --effectiveness --format json
same "paths --rerun" paths "${TOK[@]}" --skip on --mlp none --layernorm none --effectiveness --rerun 2 --repeats 2 \
  --seed 1 --format json
same "bounds json" bounds "${TOK[@]}" --skip off --mlp none --layernorm none --format json
# certified runs: every quantity's enclosure travels with it (JSON "intervals", proven verdicts)
same "forward certified json" forward "${TOK[@]}" --check certified --format json
same "bounds certified json" bounds "${TOK[@]}" --skip off --mlp none --layernorm none --check certified \
  --format json
same "random batch" collapse --model "$T/m" --random-input 6 --batch 5 --seed 2 -q --format json

# report: the HTML file (its --out) is the output.
"$SANPATH" report "${TOK[@]}" --out "$T/one.html" 2>"$T/one.err"
c1=$?
"${MPIRUN[@]}" "$SANPATH" report "${TOK[@]}" --out "$T/two.html" 2>"$T/two.err"
c2=$?
if [ $c1 = 0 ] && [ $c2 = 0 ] && cmp -s "$T/one.html" "$T/two.html"; then
  ok "report: the same HTML under mpirun -np 2 ($(grep -c '^mpi:' "$T/two.err") shared batches)"
else
  fail "report: exit $c1 / $c2 or the HTML differs: $(head -c 400 "$T/two.err")"
fi

# A real checkpoint, as the issue's user runs it.
BERT=$REAL/bert-ticket-classifier
printf '2,15,27,3\n5,6,7\n8,9,10,11,12\n2,40,41,3\n2,100,200,300,3\n' >"$T/bert.txt"
same "bert-ticket-classifier collapse" collapse --model "$BERT" --tokens-file "$T/bert.txt" -q --format json

# Qwen3 and Gemma 3 (query/key norms; Gemma 3's rotary per layer and window), tiny models of 2 layers.
source "$(dirname "$0")/../support/family_options.sh"
printf '1,2,3\n4,5,6,7,8\n9,10\n11,12,13,14,15,16,17\n18,19,0,1\n' >"$T/qk.txt"
for fam in qwen3 gemma3; do
  # shellcheck disable=SC2086
  "$SANPATH" init --out "$T/$fam" --layout $fam "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[$fam]} >/dev/null 2>&1 ||
    fail "init --layout $fam"
  same "$fam forward json" forward --model "$T/$fam" --tokens-file "$T/qk.txt" -q --format json
  same "$fam paths --effectiveness" paths --model "$T/$fam" --tokens-file "$T/qk.txt" -q --skip on --mlp none \
    --layernorm none --effectiveness --format json
done

# ---- path shards of one input ---------------------------------------------
# 5 layers, 3 heads, skip on: 4^5 = 1024 paths in 256 subtrees (4 paths
# each). Enumeration shares the subtrees in rounds, top-K its rounds of 128
# subtrees with the best bound met between rounds (the node counts in the
# JSON must match too), sampling its blocks of 64 paths.
"$SANPATH" init --out "$T/m5" --layout bert --layers 5 --heads 3 --d-model 12 --d-ff 24 --vocab 50 --std 0.4 \
  --seed 4 >/dev/null 2>&1 || fail "init m5"
SAN=(--model "$T/m5" --tokens 1,2,3,4,5,6 --skip on --mlp none --layernorm none -q)
NOTE="^mpi: 2 ranks, 256 path subtrees round robin in [0-9]* rounds (rank 0: 128 in .* s, rank 1: 128 in .* s)"
same "paths --enumerate, auto (confirmed at a second precision)" paths "${SAN[@]}" --enumerate --format json
same "paths --enumerate, double, csv" paths "${SAN[@]}" --enumerate --precision double --format csv
NOTE="^mpi: 2 ranks, 256 path subtrees round robin in 2 rounds (rank 0: 128 in .* s, rank 1: 128 in .* s)"
same "paths --enumerate --top 7" paths "${SAN[@]}" --enumerate --top 7 --format json
grep -q '"nodes"' "$T/two.out" || fail "paths --top: no node count in the JSON"
NOTE="^mpi: 2 ranks, 5 blocks of 64 sampled paths round robin (rank 0: 3 in .* s, rank 1: 2 in .* s)"
same "paths --sample 300 --length 3" paths "${SAN[@]}" --sample 300 --length 3 --seed 5 --format json
NOTE="^mpi: 2 ranks, 5 inputs round robin (rank 0: 3 in .* s, rank 1: 2 in .* s)"

# ---- errors -----------------------------------------------------------------
# expect_same_error NAME CODE ARGS...: alone and under mpirun, the same exit
# code CODE and the same one error line, printed once; no output file.
expect_same_error() {
  local name=$1 want=$2
  shift 2
  rm -f "$T/one.out" "$T/two.out"
  "$SANPATH" "$@" --output "$T/one.out" >/dev/null 2>"$T/one.err"
  local c1=$?
  "${MPIRUN[@]}" "$SANPATH" "$@" --output "$T/two.out" >/dev/null 2>"$T/two.err"
  local c2=$?
  local line
  line=$(grep '^sanpath: error: ' "$T/one.err")
  if [ $c1 != "$want" ] || [ $c2 != "$want" ]; then
    fail "$name: exit $c1 alone, $c2 under mpirun (want $want): $(head -c 600 "$T/two.err")"
  elif [ -z "$line" ] || [ "$(grep -cxF "$line" "$T/two.err")" != 1 ] || [ "$(grep -c '^sanpath: error' "$T/two.err")" != 1 ]; then
    fail "$name: the error line differs or is not printed once under mpirun: $(head -c 800 "$T/two.err")"
  elif [ -e "$T/one.out" ] || [ -e "$T/two.out" ]; then
    fail "$name: an output file was written"
  else
    ok "$name: exit $want and, once: $line"
  fi
}

# Input 2 (index 1, rank 1's: 300 tokens) is too long for the memory budget; inputs 1 and 3 fit.
printf '1,2\n%s\n3,4\n' "$(for i in $(seq 1 300); do echo $((i % 50)); done | paste -sd,)" >"$T/long.txt"
expect_same_error "an input of rank 1 over the memory budget" 5 forward --model "$T/m" --tokens-file "$T/long.txt" \
  -q --memory-budget 4MiB
# A token outside the vocabulary on line 2: refused before any work, named once.
printf '1,2,3\n4,500,6\n' >"$T/bad.txt"
expect_same_error "a bad token line" 3 collapse --model "$T/m" --tokens-file "$T/bad.txt" -q

# A command without a batch runs whole on each rank, and says so.
"${MPIRUN[@]}" "$SANPATH" forward --model "$T/m" --tokens 1,2,3 -q --format json >"$T/two.stdout" 2>"$T/two.err"
"$SANPATH" forward --model "$T/m" --tokens 1,2,3 -q --format json >"$T/one.stdout" 2>/dev/null
if cmp -s "$T/one.stdout" "$T/two.stdout" && grep -q "^mpi: 2 ranks, nothing shared" "$T/two.err"; then
  ok "one input: the same output, and stderr says nothing was shared"
else
  fail "one input under mpirun: $(head -c 400 "$T/two.err")"
fi

# Ctrl-C on mpirun ends every rank at once and leaves no output file.
"${MPIRUN[@]}" "$SANPATH" collapse --random-input 32 --batch 4 -q --format json --output "$T/int.out" \
  >/dev/null 2>"$T/int.err" &
job=$!
sleep 3
kill -INT "$job"
start=$SECONDS
wait "$job"
code=$?
sleep 1
if [ $code = 0 ]; then
  fail "Ctrl-C on mpirun: the job went on to exit 0 (it ran $((SECONDS - start)) s more)"
elif [ -e "$T/int.out" ]; then
  fail "Ctrl-C on mpirun: an output file was written"
elif pgrep -f "$T/int.out" >/dev/null; then
  fail "Ctrl-C on mpirun: a rank is still running: $(pgrep -af "$T/int.out")"
else
  ok "Ctrl-C on mpirun: every rank ended within $((SECONDS - start)) s (exit $code), no output file"
fi

[ "$fails" = 0 ] || exit 1
echo "mpi: all checks passed"
