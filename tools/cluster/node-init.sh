#!/usr/bin/env bash
# Inside a node's fresh UTS, IPC and mount namespaces (called by exec.sh only): name the node,
# give it its own /etc/hosts and /dev/shm, show its disk at CLUSTER_ROOT/data and hide the
# other nodes' disks, then run the command.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
node=$1
shift
hostname "$node"
mount --bind "/etc/netns/$(cluster_ns "$node")/hosts" /etc/hosts
mount -t tmpfs -o size=64m,mode=1777 halo-shm /dev/shm
mount --bind "$CLUSTER_ROOT/disks/$node" "$CLUSTER_ROOT/data"
mount -t tmpfs -o ro,size=4k,mode=755 halo-hidden "$CLUSTER_ROOT/disks"
export HALO_CLUSTER CLUSTER_ROOT
exec "$@"
