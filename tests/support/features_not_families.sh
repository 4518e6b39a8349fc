#!/usr/bin/env bash
# Below io/, a model is its features, never its family (docs style.md, "A new
# layout family"): compute/, analysis/ and report/ read what the model states
# (its Architecture, its EmbeddingRecipe) and never name a Layout, test a
# family (token_rows_only, rotary_family, parse_layout, layout_names) or read
# Embeddings::kind. Comment lines are not read.
# Usage: features_not_families.sh PROJECT_ROOT
set -euo pipefail
root=${1:?project root}
dirs=()
for layer in compute analysis report; do
  for dir in "$root/src/$layer" "$root/include/sanpath/$layer"; do [ -d "$dir" ] && dirs+=("$dir"); done
done
[ "${#dirs[@]}" -gt 0 ] || { echo "features_not_families: no compute/, analysis/ or report/ folder under $root"; exit 1; }
pattern='\bLayout\b|\btoken_rows_only\b|\brotary_family\b|\bparse_layout\b|\blayout_names\b|(embeddings\(\)->|\)\.|\be\.|\bemb\.|\bemb->)kind\b'
hits=$(grep -rnE "$pattern" "${dirs[@]}" | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true)
if [ -n "$hits" ]; then
  echo "features_not_families: a family named below io/ (state a feature of the model instead):"
  sed "s|$root/||" <<<"$hits"
  exit 1
fi
echo "features_not_families: compute/, analysis/ and report/ name no layout family"
