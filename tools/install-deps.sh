#!/usr/bin/env bash
# Installs the Debian packages halo builds and tests with, only those missing.
# Called by every Makefile target so that `make demo` / `make test` work on a fresh machine.
# Uses sudo when not root; does nothing (and asks for nothing) when all are present.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libmetis-dev metis            # partitioner (library + gpmetis for cross-checks)
  libptscotch-dev               # --method ptscotch (PT-Scotch over MPI; int32 and int64 builds)
  libopenmpi-dev openmpi-bin    # MPI runtime
  libboost-graph-dev            # components, RCM ordering
  libgtest-dev                  # tests
  zlib1g-dev                    # gzip readers / writers
  nlohmann-json3-dev            # meta.json, JSON logs
  libcli11-dev                  # command line
  libopenblas-openmp-dev        # GEMM in the CPU backend (OpenMP threading, like halo)
  python3-matplotlib            # tools/plot-log.py (and its test)
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-scipy python3-pytest python3-mypy
                                # the Python package (python/: import halo) and its tests
  iproute2 procps bc            # tools/cluster (namespaces, links), the failure tests
)

# `make fuzz` also needs clang and its libFuzzer runtime; `make lint` / `make format` the
# clang tools of the same release; `make test` a venv for KaMinPar's Python package.
case "${1:-}" in
  --fuzz) packages+=(clang libclang-rt-14-dev) ;;
  --lint) packages+=(clang-tidy-14 clang-format-14) ;;
  --python) packages+=(python3-venv) ;;  # tools/install-kaminpar.sh
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# A stale or absent package list makes apt-get install fail on a fresh machine.
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
