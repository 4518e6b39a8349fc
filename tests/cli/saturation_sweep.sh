#!/usr/bin/env bash
# Confirmed digits must be true digits: a sweep of seeded random models
# (saturation_sweep.py: the layout of every family, weight scales 0.02 to
# 0.5, the paper's four variants, depth 12, and the saturating
# DistilBERT of the issue "A false confirmed value") in which every digit the
# default run confirms agrees with `--check certified`'s enclosure, and every
# confirmed measure with a pass two tiers above the auto run's confirming
# tier (1,025 bits). The whole grid: --full (bench-sized).
# Usage: bash saturation_sweep.sh <sanpath binary> <shared dir> <tmp dir>
set -eu
work=$(mktemp -d "${3:-/tmp}/saturation.XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$(dirname "$0")/saturation_sweep.py" "$1" "$work"
