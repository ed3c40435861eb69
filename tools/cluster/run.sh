#!/usr/bin/env bash
# Runs a command on a node of the cluster (node1 unless --node) with Open MPI set up for it:
# the cluster's hostfile, its launch agent, TCP only (btl tcp,self: no shared-memory transport,
# and none could work between nodes anyway), the node's eth0 for every connection, ranks placed
# by slot (rank r on node r / slots + 1) and not bound to cores, and TCP keepalives short enough
# that the launcher notices a lost link within seconds.
#
#   run.sh [--node NODE] [--] mpirun -np 4 build/bin/halo train $CLUSTER_ROOT/data/parts ...
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster_load
node=node1
while [ $# -gt 0 ]; do
  case "$1" in
    --node) node=${2:?}; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || cluster_die "usage: run.sh [--node NODE] [--] COMMAND [ARGS...]"
export OMPI_MCA_plm_rsh_agent="$CLUSTER_TOOLS/agent.sh"
export OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_orte_default_hostfile="$CLUSTER_ROOT/hostfile"
export OMPI_MCA_btl=tcp,self
export OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0
export OMPI_MCA_rmaps_base_mapping_policy=slot OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_oob_tcp_keepalive_time=2 OMPI_MCA_oob_tcp_keepalive_intvl=1 OMPI_MCA_oob_tcp_keepalive_probes=3
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
exec "$CLUSTER_TOOLS/exec.sh" "$node" "$@"
