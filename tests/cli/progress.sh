#!/usr/bin/env bash
# Progress on stderr: a bar with rate (and ETA while a stage runs) when stderr
# is a terminal (a pseudo-terminal from `script`), erased at the end; nothing
# when stderr is a pipe or a file, and nothing with --quiet.
# Usage: progress.sh SANPATH SHARED_DIR TMP_DIR
set -euo pipefail
sanpath=$1
tmp=$3/progress
rm -rf "$tmp"
mkdir -p "$tmp"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
command -v script >/dev/null || fail "script (util-linux) is not installed"

# On a terminal: the bar. stdout goes to a file, so the pty carries stderr only.
script -qec "'$sanpath' collapse --precision 128 >'$tmp/table.txt'" /dev/null </dev/null >"$tmp/tty.txt" ||
  fail "sanpath collapse under script failed: $(tail -c 500 "$tmp/tty.txt")"
tr '\r' '\n' <"$tmp/tty.txt" >"$tmp/tty-lines.txt"
grep -q "^.\[Ksanpath: SAN (1/4): forward pass at 128 bits \[-\{20\}\] 0/12$" "$tmp/tty-lines.txt" ||
  fail "no empty bar at the start: $(head -c 400 "$tmp/tty-lines.txt")"
grep -qE '\[#{20}\] 12/12 [0-9.]+/s [0-9]+:[0-9]{2}$' "$tmp/tty-lines.txt" ||
  fail "no full bar with rate and time: $(head -c 600 "$tmp/tty-lines.txt")"
grep -q "full (4/4): confirming run" "$tmp/tty-lines.txt" || fail "the last variant's stage was not shown"
# Erased at the end: the last bytes are carriage return + erase-line.
[ "$(tail -c 4 "$tmp/tty.txt" | od -An -c | tr -d ' ')" = '\r033[K' ] ||
  fail "the bar is not erased at the end: $(tail -c 40 "$tmp/tty.txt" | od -c | head -3)"
grep -q "^layer" "$tmp/table.txt" || fail "collapse printed no table under script"

# An ETA is drawn while a stage runs. Each layer of this pass takes about
# 0.6 s here (4 layers at 4098 bits), six times the bar's 100 ms between
# redraws, so every layer's step is drawn on any plausible machine (the
# redraw rules themselves are tested in tests/cli/test_progress.cpp).
"$sanpath" init --out "$tmp/m4.safetensors" --layers 4 --heads 4 --d-model 32 >/dev/null || fail "init failed"
script -qec "'$sanpath' forward --model '$tmp/m4.safetensors' --random-input 8 --precision 4098 --no-confirm >/dev/null" \
  /dev/null </dev/null >"$tmp/tty-slow.txt" || fail "sanpath forward at 4098 bits under script failed"
tr '\r' '\n' <"$tmp/tty-slow.txt" >"$tmp/tty-slow-lines.txt"
grep -qE '^.\[Ksanpath: .*\[#*-+\] [1-3]/4 [0-9.]+/s ETA [0-9]+:[0-9]{2}$' "$tmp/tty-slow-lines.txt" ||
  fail "no ETA while a stage runs: $(head -20 "$tmp/tty-slow-lines.txt")"

# The report's sections draw their progress too.
script -qec "'$sanpath' report --out '$tmp/r.html'" /dev/null </dev/null >"$tmp/tty-report.txt" ||
  fail "sanpath report under script failed"
tr '\r' '\n' <"$tmp/tty-report.txt" >"$tmp/tty-report-lines.txt"
grep -q "sanpath: bounds: " "$tmp/tty-report-lines.txt" || fail "no progress of the bounds section"
grep -q "sanpath: path lengths: " "$tmp/tty-report-lines.txt" || fail "no progress of the path-length section"

# --quiet on a terminal: nothing.
script -qec "'$sanpath' collapse --precision double --quiet >/dev/null" /dev/null </dev/null >"$tmp/quiet.txt" || fail "collapse --quiet failed"
[ ! -s "$tmp/quiet.txt" ] || fail "--quiet still drew: $(head -c 200 "$tmp/quiet.txt" | od -c | head -3)"

# Not a terminal: nothing on stderr.
"$sanpath" collapse --precision double >/dev/null 2>"$tmp/err.txt" || fail "collapse failed"
[ ! -s "$tmp/err.txt" ] || fail "progress on a non-terminal stderr: $(head -c 200 "$tmp/err.txt")"
"$sanpath" collapse --precision double 2>&1 >/dev/null | cat >"$tmp/pipe.txt"
[ ! -s "$tmp/pipe.txt" ] || fail "progress into a pipe: $(head -c 200 "$tmp/pipe.txt")"
echo "progress: PASS"
