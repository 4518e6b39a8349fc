# Sourced by the shell tests of the CLI (tests/cli/*.sh), each run by CTest as
#   bash NAME.sh <sanpath binary> <shared dir> <tmp dir>

# cli_workdir NAME BINARY SHARED TMP: SANPATH and SHARED as absolute paths,
# REAL = the real checkpoints under SHARED, and T = TMP/NAME, a folder made
# empty now and removed on exit.
cli_workdir() {
  SANPATH=$(realpath "$2")
  SHARED=$(realpath -m "$3")
  REAL=$SHARED/data/real-models
  T=$(realpath -m "$4")/$1
  rm -rf "$T"
  mkdir -p "$T"
  trap 'rm -rf "$T"' EXIT
}

# cli_checks NAME BINARY SHARED TMP: cli_workdir, $dir = T, and the checks
# below counting their failures in $fails (a test that wants other helpers
# defines its own after sourcing this file).
cli_checks() {
  cli_workdir "$@"
  dir=$T
  fails=0
}

# fail MESSAGE: one failure, said on stderr.
fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}

# expect CODE CMD...: runs CMD, stdout to $dir/out, stderr to $dir/err; a
# failure when it exits with another code.
expect() {
  local want=$1
  shift
  "$@" >"$dir/out" 2>"$dir/err"
  local got=$?
  [ "$got" -eq "$want" ] || fail "exit $got (want $want): $* -- $(head -c 400 "$dir/err")"
}

# check NAME PYTHON: runs PYTHON (Debian's python3, with json, math and sys
# imported, j = the JSON of $dir/out, num(s) = the float of a printed value
# or of the bound of "< 1e-N"); a failure named NAME when it raises.
check() {
  local name=$1
  shift
  /usr/bin/python3 -c "import json, math, sys
j = json.load(open('$dir/out'))
def num(s):
    return float(s[2:]) if s.startswith('< ') else float(s)
$1" || fail "$name"
}

# agree FILE_A FILE_B: two `forward --format json` outputs of one model and
# input agree, layer by layer, to every digit both confirm (the strings carry
# 20 significant digits), each with 15 digits at least.
agree() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
from decimal import Decimal
c, d = (json.load(open(f))["layers"] for f in sys.argv[1:3])
assert len(c) == len(d), (len(c), len(d))
for a, b in zip(c, d):
    k = min(a["digits"], b["digits"], 19)
    x, y = Decimal(a["relative_residual"]), Decimal(b["relative_residual"])
    assert k >= 15 and abs(x - y) <= abs(y) * Decimal(10) ** (1 - k), (a, b)
PY
}
