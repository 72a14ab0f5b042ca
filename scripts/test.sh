#!/usr/bin/env bash
# The whole test suite: install dependencies, build, run op, parity, unit and CLI tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"${BIOINFER_JOBS:-2}"
