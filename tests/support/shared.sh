# Sourced by shell tests that read the real checkpoints in ../shared.
# require_shared_in_ci DIR: outside CI, returns 1 (the caller skips, saying so)
# when DIR is absent; with CI set, a missing DIR fails the test, so CI never
# passes by silently losing the real-checkpoint cases.
require_shared_in_ci() {
  [ -e "$1" ] && return 0
  if [ -n "${CI:-}" ]; then
    echo "FAIL: $1 is missing and CI is set: the real-checkpoint cases cannot be skipped in CI" >&2
    exit 1
  fi
  echo "SKIP: $1 is absent (outside CI the real-checkpoint cases are skipped)"
  return 1
}
