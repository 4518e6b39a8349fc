# Shared by tests/cli/reference_*.sh (sourced). Those scripts run as
#   bash script <sanpath binary> <shared dir> <tmp dir>
# and compare sanpath's numbers with the mpmath reference (sanpath_ref.py).

ref_init() {
  source "$(dirname "${BASH_SOURCE[0]}")/../support/shared.sh"
  SANPATH=$1
  SHARED=$2
  TMPROOT=$3
  # In CI a missing shared folder fails here, at top level (not inside a $(...)).
  require_shared_in_ci "$SHARED/data/real-models" >/dev/null || true
  REF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  REF_PY=""
  # The Debian python3-mpmath (scripts/install-deps test) is seen by /usr/bin/python3, first: with
  # python3-gmpy2 its arithmetic is much faster at the thousands of bits deep residuals need.
  for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import mpmath' 2>/dev/null; then
      REF_PY=$py
      break
    fi
  done
  if [ -z "$REF_PY" ]; then
    echo "FAIL: no python3 with mpmath; run scripts/install-deps test (installs python3-mpmath)"
    exit 1
  fi
  if [ ! -x "$SANPATH" ]; then
    echo "FAIL: sanpath binary '$SANPATH' not found"
    exit 1
  fi
  mkdir -p "$TMPROOT"
  WORK=$(mktemp -d "$TMPROOT/$(basename "$0" .sh).XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  FAILS=0
  CASES=0
  START=$SECONDS
  export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the source tree
}

ref() { "$REF_PY" "$REF_DIR/sanpath_ref.py" "$@"; }

# fail MESSAGE: one failed check, counted in the summary.
fail() {
  echo "FAIL $1"
  FAILS=$((FAILS + 1))
}

# real_models_dir: prints the real checkpoints' folder, or nothing when absent.
real_models_dir() {
  local d=$SHARED/data/real-models
  if [ -f "$d/bert-ticket-classifier/model.safetensors" ] && [ -f "$d/gpt2-capp/model.safetensors" ]; then
    echo "$d"
  fi
}

# make_model NAME [sanpath init options...]: writes $WORK/NAME.safetensors (or a folder with --layout bert).
make_model() {
  local name=$1
  shift
  if ! "$SANPATH" init --out "$WORK/$name" "$@" >"$WORK/$name.init.log" 2>&1; then
    echo "FAIL: sanpath init --out $name $* exited non-zero:"
    cat "$WORK/$name.init.log"
    FAILS=$((FAILS + 1))
    return 1
  fi
}

# make_input NAME TOKENS D [SEED] [DTYPE] [SPREAD]: a random X = 1c^T + R written by the reference.
make_input() {
  ref gen-input --out "$WORK/$1" --tokens "$2" --d-model "$3" --seed "${4:-0}" --dtype "${5:-F64}" --spread "${6:-1}"
}

# run_case COMMAND NAME MODEL (tokens|input) VALUE [options shared by `sanpath COMMAND` and the checker...]
# Runs `sanpath COMMAND --format json` (COMMAND: forward, paths or bounds) at each precision of $PRECISIONS
# (default: auto double) and checks every printed number against the reference (check-COMMAND) at
# max(precision_bits) + 128 bits.
run_case() {
  local cmd=$1 name=$2 model=$3 kind=$4 value=$5
  shift 5
  CASES=$((CASES + 1))
  local jsons=() prec rc out
  for prec in ${PRECISIONS:-auto double}; do
    out=$WORK/$name.$prec.json
    "$SANPATH" "$cmd" --model "$model" "--$kind" "$value" "$@" --precision "$prec" --format json -q -o "$out" \
      2>"$WORK/$name.$prec.err"
    rc=$?
    if [ $rc -ne 0 ]; then
      echo "FAIL $name: sanpath $cmd --model $model --$kind $value $* --precision $prec exited $rc:"
      cat "$WORK/$name.$prec.err"
      FAILS=$((FAILS + 1))
      return
    fi
    jsons+=("$out")
  done
  local t0=$SECONDS result
  result=$(ref "check-$cmd" --model "$model" "--$kind" "$value" "$@" "${jsons[@]}")
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "ok   $name ($((SECONDS - t0)) s): ${result#ok }"
  else
    echo "FAIL $name: sanpath $cmd --model $model --$kind $value $* (precisions: ${PRECISIONS:-auto double})"
    printf '%s\n' "$result" | sed 's/^/     /'
    FAILS=$((FAILS + 1))
  fi
}

forward_case() { run_case forward "$@"; }
paths_case() { run_case paths "$@"; }
bounds_case() { run_case bounds "$@"; }

# require_command NAME: exit 0 with a SKIP line when this sanpath has no such subcommand.
require_command() {
  # (an unknown subcommand's --help prints the main help and succeeds: look in the subcommand list)
  if ! "$SANPATH" --help 2>/dev/null | grep -qE "^  $1( |\$)"; then
    echo "SKIP: this sanpath has no '$1' command"
    exit 0
  fi
}

ref_finish() {
  echo "$CASES cases, $FAILS failed, $((SECONDS - START)) s"
  [ "$FAILS" -eq 0 ]
}
