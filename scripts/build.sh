#!/usr/bin/env bash
# Configures and builds bioinfer in build/ with Ninja, Release, both cores by default.
set -euo pipefail
cd "$(dirname "$0")/.."
# with the Python module when scripts/setup.sh made .venv-python (configuring again is a no-op)
py=()
[ -x .venv-python/bin/python ] && py=(-DPython_EXECUTABLE="$PWD/.venv-python/bin/python")
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${py[@]}" >/dev/null
cmake --build build -j"${BIOINFER_JOBS:-2}"
