#!/usr/bin/env bash
# sanpath graph: exact path counts against Python's big integers
# (math.comb, **), DOT output, exit codes.
# Usage: bash graph.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks graph "$@"

# (96, 64) with skip: total 65^96, C(96,k)·64^k by length; printed at once.
start=$(date +%s%N)
expect 0 timeout 30 "$SANPATH" graph --layers 96 --heads 64 --skip on --format json
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -lt 5000 ] || fail "graph (96,64) took $ms ms"
python3 - "$dir/out" <<'EOF' || fail "graph (96,64) skip on: counts"
import json, math, sys
j = json.load(open(sys.argv[1]))
assert j["total"] == str(65 ** 96), j["total"]
assert len(j["by_length"]) == 97
for k, e in enumerate(j["by_length"]):
    assert e["length"] == k
    assert e["count"] == str(math.comb(96, k) * 64 ** k), k
assert sum(int(e["count"]) for e in j["by_length"]) == 65 ** 96
assert j["layers"] == 96 and j["heads"] == 64 and j["skip"] == "on"
EOF

# Without skip: H^L paths, all of length L.
expect 0 "$SANPATH" graph --layers 96 --heads 64 --skip off --format json
python3 - "$dir/out" <<'EOF' || fail "graph (96,64) skip off: counts"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["total"] == str(64 ** 96)
assert [e["count"] for e in j["by_length"]] == ["0"] * 96 + [str(64 ** 96)]
EOF

# Table: the total in full; CSV: one line per length.
expect 0 "$SANPATH" graph --layers 4 --heads 3 --skip on
grep -q "paths: 256 " "$dir/out" || fail "table: total 4^4 = 256 missing: $(cat "$dir/out")"
expect 0 "$SANPATH" graph --layers 4 --heads 3 --skip on --format csv
[ "$(cat "$dir/out")" = "$(printf 'length,count\n0,1\n1,12\n2,54\n3,108\n4,81')" ] || fail "csv: $(cat "$dir/out")"

# DOT: L·(H+1)+2 vertices, (H+1) + (L−1)(H+1)² + (H+1) edges, ranks per layer.
expect 0 "$SANPATH" graph --layers 3 --heads 2 --skip on --dot "$dir/g.dot" --output "$dir/counts.txt"
[ -s "$dir/out" ] && fail "--output: stdout not empty"
grep -q "paths: 27 " "$dir/counts.txt" || fail "--output: counts file"
python3 - "$dir/g.dot" <<'EOF' || fail "DOT content"
import re, sys
t = open(sys.argv[1]).read()
assert t.lstrip().startswith("digraph"), t[:40]
edges = re.findall(r"^\s*\d+\s*->\s*\d+", t, re.M)
assert len(edges) == 3 + 2 * 9 + 3, len(edges)
labels = [a or b for a, b in re.findall(r'label=(?:"([^"]*)"|(\w+))', t)]
assert len(labels) == 3 * 3 + 2, labels
for want in ["src", "sink", "L1 skip", "L3 h1", "L2 h0"]:
    assert want in labels, want
assert t.count("rank=same") == 3
EOF
leftover=$(ls -A "$dir" | grep -v -e '^g.dot$' -e '^counts.txt$' -e '^out$' -e '^err$')
[ -z "$leftover" ] || fail "temporary files left: $leftover"

# Too many edges for DOT: resource error (5), no file.
expect 5 "$SANPATH" graph --layers 1000 --heads 100 --skip on --dot "$dir/big.dot"
[ -e "$dir/big.dot" ] && fail "big.dot written"
grep -q "edges" "$dir/err" || fail "DOT refusal message: $(cat "$dir/err")"
# Counting beyond the work limit: resource error.
expect 5 "$SANPATH" graph --layers 3000 --heads 100000 --skip on

# Usage errors (2).
expect 2 "$SANPATH" graph --layers 0 --heads 2 --skip on
expect 2 "$SANPATH" graph --layers 3 --heads 2 --skip maybe
expect 2 "$SANPATH" graph --layers 3 --heads 2
expect 2 "$SANPATH" graph --layers 3 --heads 2 --skip on --format xml
# Missing directory for --dot: input error (3).
expect 3 "$SANPATH" graph --layers 3 --heads 2 --skip on --dot "$dir/no/such/dir/g.dot"

# Help: purpose, defaults, examples.
expect 0 "$SANPATH" graph --help
grep -q "Examples" "$dir/out" || fail "help: no examples"
grep -q "table" "$dir/out" || fail "help: no format default"

if [ "$fails" -gt 0 ]; then
  echo "$fails failure(s)" >&2
  exit 1
fi
echo "graph.sh: all passed"
