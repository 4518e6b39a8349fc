#!/usr/bin/env bash
# The README's short tour and docs/tour.md are pasted from real runs: re-runs
# every `$ ./build/sanpath ...` line of their console blocks (and every
# `$ printf ...` line, which writes an input file such as a token file, and
# every `$ sed ...` line, which extracts a file from an output), in order, and
# requires the output printed there byte for byte (commands without output
# must print nothing). The picture docs/collapse.svg must be what the README's
# commands write to docs/collapse.svg, byte for byte.
#
# Usage: bash readme_tour.sh <sanpath binary> <shared dir> <tmp dir>
# Each page runs in a fresh <tmp>/readme/<page>/project, where ./build/sanpath
# is the binary under test and ../shared the shared folder, as in the pages.
# Blocks that read ../shared are skipped when it is absent (and fail the test
# when CI is set).
set -euo pipefail
SANPATH=$(realpath "$1")
SHARED=$(realpath -m "$2")
T=$(realpath -m "$3")/readme
ROOT=$(dirname "$(realpath "$0")")/../..
rm -rf "$T"
source "$(dirname "$(realpath "$0")")/../support/shared.sh"
have_shared=0
require_shared_in_ci "$SHARED/data/real-models" >/dev/null && have_shared=1
# The pages' outputs hold for every build and CPU: the double products
# compute the same bits on every instruction-set level (SANPATH_ISA), and
# nothing else depends on the CPU.
status=0
for page in README.md docs/tour.md; do
  dir="$T/$(basename "$page" .md)"
  mkdir -p "$dir/project/build" "$dir/project/docs"
  ln -s "$SANPATH" "$dir/project/build/sanpath"
  [ -d "$SHARED" ] && ln -s "$SHARED" "$dir/shared"
  echo "== $page"
  (cd "$dir/project" && python3 - "$ROOT/$page" "$have_shared" <<'PY'
import subprocess, sys
page, have_shared = sys.argv[1], sys.argv[2] == "1"
lines = open(page, encoding="utf-8").read().split("\n")
runs, block = [], None
for line in lines:
    if block is None:
        if line.strip() == "```console":
            block = []
        continue
    if line.strip() == "```":
        runs.extend(block)
        block = None
    elif line.startswith("$ "):
        block.append([line[2:], []])
    elif block:
        block[-1][1].append(line)
failed = checked = skipped = 0
for cmd, expected in runs:
    if not cmd.startswith(("./build/sanpath", "printf ", "sed ")):
        continue
    if "../shared" in cmd and not have_shared:
        skipped += 1
        continue
    # stderr is not a terminal here: no progress bar, as in the pages.
    r = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], capture_output=True, text=True)
    want = "\n".join(expected) + ("\n" if expected else "")
    checked += 1
    if r.returncode != 0 or r.stdout != want:
        failed += 1
        print(f"FAIL {cmd}: exit {r.returncode}, stderr {r.stderr.strip()[:300]!r}")
        for i, (a, b) in enumerate(zip(r.stdout.split("\n"), want.split("\n"))):
            if a != b:
                print(f"  first difference, line {i + 1}:\n    page:   {b!r}\n    actual: {a!r}")
                break
        else:
            print(f"  the page has {len(want.splitlines())} lines, the run printed {len(r.stdout.splitlines())}")
    else:
        print(f"ok   {cmd}")
print(f"{checked} commands re-run, {failed} differ, {skipped} skipped (no ../shared)")
sys.exit(1 if failed or not checked else 0)
PY
  ) || status=1
done
# The README's picture: its commands wrote docs/collapse.svg in the README's project.
if cmp -s "$T/README/project/docs/collapse.svg" "$ROOT/docs/collapse.svg"; then
  echo "ok   docs/collapse.svg is what the README's commands write"
else
  echo "FAIL docs/collapse.svg differs from what the README's commands write ($T/README/project/docs/collapse.svg)"
  status=1
fi
exit $status
