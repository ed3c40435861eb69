#!/usr/bin/env bash
# Rehearses tools/gpu-check.sh on a machine without a GPU, made to look like the GPU machine
# (which has the CUDA toolkit and Python but none of halo's other dependencies): in a mount
# namespace that hides this machine's Open MPI, PMIx, hwloc, libevent and xz, so the bundle's
# relocated MPI, the library search and the tarfile fallback are what run. Every step must run
# and report within the budget; the GPU steps fail ("halo sees no GPU", "no usable CUDA
# device"), as they must here. Needs root (unshare -m).
#
#   tools/gpu-check-rehearse.sh [OUT_DIR]      (builds .gpu-bundle.tar.xz first if missing)
set -euo pipefail
out=${1:-/tmp/gpu-check-rehearsal}
[[ -f .gpu-bundle.tar.xz ]] || bash tools/gpu-bundle.sh
rm -rf "$out" && mkdir -p "$out"
start=$SECONDS
rc=0
HIDE_XZ=1 bash tools/bare-gpu-machine.sh env OUT="$out" bash tools/gpu-check.sh || rc=$?
echo "gpu-check-rehearse: gpu-check.sh exited $rc after $((SECONDS - start)) s; it returned: $(ls "$out" | tr '\n' ' ')"
[[ -s $out/summary.txt && -s $out/logs.tar.gz ]] || { echo "gpu-check-rehearse: summary.txt or logs.tar.gz missing" >&2; exit 1; }
