#!/usr/bin/env bash
# The layers include downwards only. Every #include "LAYER/..." in src/, include/, tools/ and
# python/src/ names a layer its file may include (src/layers.txt; "bioinfer/..." is core; tools
# and the Python module sit above runtime); no model's folder includes another model's; nothing
# in src/ includes the tools (the offline sweep, the CLI). Prints each include that runs the
# wrong way, with its file and line, and fails when there is one; also fails when a folder of
# src/ is not in the table. The build enforces the same table (one object library per layer).
set -euo pipefail
root="${1:-$(dirname "$0")/..}"
table="$root/src/layers.txt"
declare -A allowed
while IFS= read -r line; do
    [[ -z "$line" || "$line" == \#* ]] && continue
    layer="${line%%:*}"
    deps="${line#*:}"
    allowed[$layer]="$layer${deps}"
done < "$table"
bad=0
for d in "$root"/src/*/; do
    name="$(basename "$d")"
    if [[ -z "${allowed[$name]+x}" ]]; then
        echo "src/$name: a folder of src/ that $table does not place"
        bad=1
    fi
done
all="${!allowed[*]}"
check() {  # file, its layer, the layers it may include
    local f="$1" layer="$2" ok="$3"
    while IFS=: read -r n inc; do
        local dep="${inc%%/*}"
        [[ "$dep" == "bioinfer" ]] && dep=core
        # a header beside the file, or a third party's
        [[ " $all " == *" $dep "* || -d "$root/src/$dep" ]] || continue
        if [[ " $ok " != *" $dep "* ]]; then
            echo "${f#"$root"/}:$n: $layer includes $inc (a $dep header; $layer may include: $ok)"
            bad=1
        fi
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
             sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1:\2/')
}
while IFS= read -r f; do
    rel="${f#"$root"/src/}"
    layer="${rel%%/*}"
    [[ -n "${allowed[$layer]+x}" ]] || continue
    check "$f" "$layer" "${allowed[$layer]}"
done < <(find "$root/src" -name '*.h' -o -name '*.cpp' -o -name '*.inc' | sort)
# nothing in src/ includes a folder of tools/
for d in "$root"/tools/*/; do
    t="$(basename "$d")"
    [[ -d "$root/src/$t" ]] && continue
    if hits=$(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"$t/" "$root/src"); then
        echo "$hits" | sed "s|^$root/||; s|\$| (src includes the tools' $t)|"
        bad=1
    fi
done
# a model's folder includes no other model's: what two models share lives in nn (or bio)
while IFS=: read -r f n inc; do
    own="${f#"$root"/src/models/}"
    own="${own%%/*}"
    other="${inc#models/}"
    other="${other%%/*}"
    if [[ "$inc" == models/*/* && "$other" != "$own" ]]; then
        echo "${f#"$root"/}:$n: the $own model includes $inc, another model's header"
        bad=1
    fi
done < <(find "$root/src/models" -mindepth 2 \( -name '*.h' -o -name '*.cpp' \) -print0 | sort -z |
         xargs -0 grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"models/' |
         sed -E 's/^([^:]*):([0-9]+):[^"]*"([^"]*)".*/\1:\2:\3/')
while IFS= read -r f; do
    check "$f" "tools" "$all"
done < <(find "$root/tools" "$root/python/src" -name '*.h' -o -name '*.cpp' | sort)
[[ -d "$root/include/bioinfer" ]] && while IFS= read -r f; do
    check "$f" "core" "${allowed[core]}"
done < <(find "$root/include/bioinfer" -name '*.h' | sort)
exit $bad
