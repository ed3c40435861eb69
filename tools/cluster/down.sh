#!/usr/bin/env bash
# Removes everything up.sh made (processes of the nodes, namespaces, cgroups, /etc/netns
# entries, the cluster's folder with the node disks), also after a failed or half-made run.
#   down.sh [--keep-disks]
set -uo pipefail
. "$(dirname "$0")/lib.sh"
keep=0
[ "${1:-}" = --keep-disks ] && keep=1
read -r kind base <<< "$(cluster_cgroup_kind)"
nodes=$(ip netns list 2> /dev/null | awk '{print $1}' | sed -n "s/^$HALO_CLUSTER-\(node[0-9]*\)$/\1/p")
if [ "$kind" != none ] && [ -d "$base/$HALO_CLUSTER" ]; then
  nodes="$nodes $(cd "$base/$HALO_CLUSTER" && ls -d node* 2> /dev/null)"
fi
for node in $(echo "$nodes" | tr ' ' '\n' | sort -u); do
  cluster_kill_node "$node"
  ip netns del "$(cluster_ns "$node")" 2> /dev/null
  rm -rf "/etc/netns/$(cluster_ns "$node")"
  [ "$kind" != none ] && rmdir "$base/$HALO_CLUSTER/$node" 2> /dev/null
  rmdir "/sys/fs/cgroup/cpu/halo-cluster/$HALO_CLUSTER/$node" 2> /dev/null
done
[ "$kind" != none ] && rmdir "$base/$HALO_CLUSTER" 2> /dev/null
rmdir "/sys/fs/cgroup/cpu/halo-cluster/$HALO_CLUSTER" 2> /dev/null
ip netns del "$(cluster_bridge_ns)" 2> /dev/null
if [ -f "$CLUSTER_ROOT/anchor.pid" ]; then kill -9 "$(cat "$CLUSTER_ROOT/anchor.pid")" 2> /dev/null; fi
if [ "$keep" = 1 ]; then
  rm -f "$CLUSTER_ROOT/cluster.env" "$CLUSTER_ROOT/anchor.pid"
elif [ -n "$CLUSTER_ROOT" ] && [ "$CLUSTER_ROOT" != / ] && { [ -d "$CLUSTER_ROOT/disks" ] || [ -f "$CLUSTER_ROOT/hostfile" ]; }; then
  rm -rf "$CLUSTER_ROOT"  # only a folder up.sh made
fi
echo "cluster '$HALO_CLUSTER' removed"
exit 0
