#!/usr/bin/env bash
# merge.sh TAG: /tmp/rb19/TAG/{old,new}/rN (REPEATS=1 runs) -> /tmp/rb19/TAG/{old,new}/all, summarized
set -euo pipefail
tag=$1
for v in old new; do
  d=/tmp/rb19/$tag/$v; rm -rf "$d/all"; mkdir -p "$d/all/raw"; : > "$d/all/env.txt"
  for r in "$d"/r*; do
    n=${r##*/r}
    [ -f "$r/table.md" ] || continue
    cat "$r/env.txt" >> "$d/all/env.txt"
    for f in "$r"/raw/*; do b=${f##*/}; cp "$f" "$d/all/raw/${b/_r1_/_r${n}_}"; done
  done
  python3 /work/main/bench/summarize_infer.py "$d/all" > "$d/all/table.md"
done
