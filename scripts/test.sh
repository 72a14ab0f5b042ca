#!/usr/bin/env bash
# The whole test suite: install dependencies, build, run op, parity, unit and CLI tests, then
# the Python package's tests on the module the build made.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"${BIOINFER_JOBS:-2}"
ls build/python/bioinfer/_bioinfer*.so >/dev/null 2>&1 || {
    echo "test: build/python/bioinfer has no module (is .venv-python there? bash scripts/setup.sh)" >&2
    exit 1
}
PYTHONPATH="$PWD/build/python" .venv-python/bin/python -m pytest -q python/tests
