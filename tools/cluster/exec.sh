#!/usr/bin/env bash
# Runs a command on node NODE of the cluster: in the node's network namespace and cgroups, with
# its host name (a UTS namespace), its own System V IPC and /dev/shm (no shared memory between
# nodes), its disk at CLUSTER_ROOT/data and no other node's disk visible.
#
#   exec.sh NODE COMMAND [ARGS...]
#
# Works from the host and from inside any node (the launch agent enters node2 from node1): it
# first returns to the namespaces up.sh ran in, through the anchor process up.sh left.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster_load
node=${1:-}
[[ "$node" =~ ^node[0-9]+$ ]] && [ "${node#node}" -ge 1 ] && [ "${node#node}" -le "$CLUSTER_NODES" ] ||
  cluster_die "exec.sh: no node '$node' in cluster '$HALO_CLUSTER' (node1..node$CLUSTER_NODES)"
shift
[ $# -ge 1 ] || cluster_die "usage: exec.sh NODE COMMAND [ARGS...]"
anchor=$(cat "$CLUSTER_ROOT/anchor.pid")
[ -e "/proc/$anchor/ns/mnt" ] || cluster_die "the cluster's anchor process ($anchor) is gone: run up.sh again"
if [ "$(readlink /proc/self/ns/mnt)" != "$(readlink "/proc/$anchor/ns/mnt")" ] ||
   [ "$(readlink /proc/self/ns/net)" != "$(readlink "/proc/$anchor/ns/net")" ]; then
  wd=/
  [ -d "$PWD" ] && wd=$PWD
  exec nsenter -t "$anchor" --mount --uts --ipc --net --wd="$wd" -- "$0" "$node" "$@"
fi
# Join the node's cgroups: this shell's pid becomes the command's (exec below).
cg=$(cluster_cgroup "$node")
if [ -n "$cg" ] && [ -d "$cg" ]; then echo $$ > "$cg/cgroup.procs"; fi
cpucg=/sys/fs/cgroup/cpu/halo-cluster/$HALO_CLUSTER/$node
if [ -d "$cpucg" ]; then echo $$ > "$cpucg/cgroup.procs"; fi
exec nsenter --net="/run/netns/$(cluster_ns "$node")" -- \
  unshare --mount --uts --ipc --propagation private -- "$CLUSTER_TOOLS/node-init.sh" "$node" "$@"
