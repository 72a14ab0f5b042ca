#!/usr/bin/env bash
# Models and blocks compute through ops: a line in src/nn or src/models that touches tensor data
# directly (.f32() / .i32()) must sit under a "host-side:" comment (within the 6 lines above it)
# saying why that work is cheap and belongs on the host (a table built once at load, say).
set -euo pipefail
root="${1:-$(dirname "$0")/..}"
bad=0
while IFS= read -r f; do
    awk -v file="$f" '
        { line[NR] = $0 }
        /\.(f32|i32)\(\)/ {
            ok = 0
            for (k = NR; k >= NR - 6 && k >= 1; --k) if (line[k] ~ /host-side:/) ok = 1
            if (!ok) { printf "%s:%d: data touched outside an op: %s\n", file, NR, $0; bad = 1 }
        }
        END { exit bad }' "$f" || bad=1
done < <(find "$root/src/nn" "$root/src/models" -name '*.cpp' -o -name '*.h' | sort)
exit $bad
