#!/usr/bin/env bash
# Runs COMMAND... as it would run on the lent GPU machine, which has the CUDA toolkit and Python
# but none of halo's other dependencies: in a new mount namespace (needs root), this machine's
# Open MPI, PMIx, hwloc and libevent are hidden (and xz too with HIDE_XZ=1), so only the
# bundle's copies can serve. Used by gpu-bundle.sh's self-test and gpu-check-rehearse.sh.
#
#   [HIDE_XZ=1] tools/bare-gpu-machine.sh COMMAND [ARGS...]
set -euo pipefail
if [[ ${HALO_BARE_NAMESPACE:-} != 1 ]]; then
  exec env HALO_BARE_NAMESPACE=1 unshare -m bash "$0" "$@"
fi
lib=/usr/lib/x86_64-linux-gnu
for d in "$lib/openmpi" "$lib/pmix2" "$lib/hwloc" /etc/openmpi /usr/share/openmpi; do
  [[ -d $d ]] && mount -t tmpfs none "$d"
done
hidden=("$lib"/lib{mpi,open-pal,open-rte,pmix,hwloc,event,munge,fabric,ucp,uct,ucs,ucm}*.so*
        /usr/bin/orterun /usr/bin/orted /usr/bin/mpirun)
[[ ${HIDE_XZ:-0} == 1 ]] && hidden+=(/usr/bin/xz)
for f in "${hidden[@]}"; do
  [[ -e $f ]] && mount --bind /dev/null "$(readlink -f "$f")"
done
exec "$@"
