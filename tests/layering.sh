#!/usr/bin/env bash
# The layers include downwards only (docs/architecture.md): src/core includes core; src/backend
# (the kernel table, the registry, the backends, the run-time tuned table) includes core and
# backend, never ops, nn or above; src/ops includes no nn or above; nothing in src includes the
# tools (the offline sweep).
set -euo pipefail
root="${1:-$(dirname "$0")/..}"
bad=0
check() {  # check DIR ALLOWED-PREFIX-REGEX
    local dir="$1" allowed="$2" hits
    hits=$(grep -rnE '^#include "' "$root/$dir" | grep -vE "#include \"($allowed)/" || true)
    if [ -n "$hits" ]; then
        echo "$dir includes above its layer:"
        echo "$hits"
        bad=1
    fi
}
check src/core 'bioinfer|core'
check src/backend 'bioinfer|core|backend'
check src/ops 'bioinfer|core|backend|ops'
if grep -rnE '^#include "sweep/' "$root/src"; then
    echo "src includes the tools' sweep"
    bad=1
fi
exit $bad
