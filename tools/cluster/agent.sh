#!/usr/bin/env bash
# Open MPI's launch agent for the cluster (plm_rsh_agent), in place of ssh: mpirun calls
# `agent.sh HOST COMMAND...` to start its daemon on HOST; this runs the command there through
# exec.sh. Like ssh, it passes no environment beyond a login's (PATH, HOME, the cluster's name):
# variables a job needs travel with `mpirun -x NAME`, as on real hosts.
set -euo pipefail
host=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
exec env -i PATH="$PATH" HOME="${HOME:-/root}" LANG=C.UTF-8 HALO_CLUSTER="${HALO_CLUSTER:-halo}" \
  CLUSTER_ROOT="${CLUSTER_ROOT:-}" "$here/exec.sh" "$host" /bin/sh -c "$*"
