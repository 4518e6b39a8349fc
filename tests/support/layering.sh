#!/usr/bin/env bash
# The library's folders are its data flow: core → model → io → compute →
# analysis → report. A file may include headers of its own layer and of the
# layers before it, never of a later one (headers and sources alike).
# Usage: layering.sh PROJECT_ROOT
set -euo pipefail
root=${1:?project root}
layers=(core model io compute analysis report)
rank() { local i; for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
bad=0
for dir in include/sanpath src; do
  for layer in "${layers[@]}"; do
    mine=$(rank "$layer")
    [ -d "$root/$dir/$layer" ] || continue
    while IFS= read -r line; do
      file=${line%%:*}
      target=$(sed -E 's/.*#include [<"](sanpath\/)?([a-z_]+)\/.*/\2/' <<<"${line#*:}")
      theirs=$(rank "$target")
      if [ "$theirs" -gt "$mine" ]; then
        echo "layering: ${file#$root/} ($layer) includes a header of the later layer '$target': ${line#*:}"
        bad=1
      fi
    done < <(grep -HE '#include [<"](sanpath/)?(core|model|io|compute|analysis|report)/' "$root/$dir/$layer"/* || true)
  done
done
[ -f "$root/include/sanpath/sanpath.hpp" ] || { echo "layering: the umbrella header sanpath/sanpath.hpp is missing"; bad=1; }
if [ "$bad" = 0 ]; then echo "layering: every include points to the same or an earlier layer"; fi
exit "$bad"
