#!/usr/bin/env bash
# Configures (once) and builds bioinfer in build/ with Ninja, Release, both cores by default.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"${BIOINFER_JOBS:-2}"
