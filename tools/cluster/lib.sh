# Shared by the tools/cluster scripts (sourced, not run): names, paths and cgroup helpers of a
# "cluster in a box": nodes node1..nodeN, each a network namespace (plus, per command entered,
# its own UTS, IPC and mount namespaces) with its own disk folder and memory cgroup.
#
# A cluster is named (HALO_CLUSTER, default "halo") so that two can exist side by side; its
# files live under CLUSTER_ROOT (default /tmp/halo-cluster-NAME):
#   cluster.env       what up.sh made (read by the other scripts)
#   hostfile          Open MPI hostfile: "nodeK slots=S" per node
#   disks/nodeK/      node K's own disk; a command on node K sees it at CLUSTER_ROOT/data and
#                     sees no other node's disk (disks/ is hidden there)
#   data/             the mount point of the node's disk (empty on the host)

HALO_CLUSTER=${HALO_CLUSTER:-halo}
CLUSTER_ROOT=${CLUSTER_ROOT:-/tmp/halo-cluster-$HALO_CLUSTER}
CLUSTER_TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# One private subnet that exists only inside the cluster's namespaces (node K is .(10+K)).
CLUSTER_SUBNET_PREFIX=10.213.0

cluster_die() { echo "cluster: $*" >&2; exit 1; }

cluster_ns() { echo "$HALO_CLUSTER-$1"; }          # network namespace of node $1
cluster_bridge_ns() { echo "$HALO_CLUSTER-br"; }   # the namespace holding the bridge
cluster_addr() { echo "$CLUSTER_SUBNET_PREFIX.$((10 + ${1#node}))"; }

# Why this machine cannot host a cluster (empty when it can): root, iproute2, netns, unshare.
cluster_unavailable_reason() {
  [ "$(id -u)" = 0 ] || { echo "needs root (network namespaces, cgroups)"; return; }
  command -v ip > /dev/null || { echo "needs iproute2 (ip)"; return; }
  command -v unshare > /dev/null && command -v nsenter > /dev/null || { echo "needs util-linux (unshare, nsenter)"; return; }
  local probe="halo-probe-$$"
  if ! ip netns add "$probe" 2> /dev/null; then echo "cannot create network namespaces here"; return; fi
  ip netns del "$probe" 2> /dev/null
  if ! unshare --uts --ipc --mount true 2> /dev/null; then echo "cannot create UTS/IPC/mount namespaces here"; return; fi
}

# The memory cgroup layout of this machine: "v2 DIR" (memory.max), "v1 DIR" (memory.limit_in_bytes)
# or "none".
cluster_cgroup_kind() {
  if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    echo "v2 /sys/fs/cgroup/halo-cluster"
  elif [ -d /sys/fs/cgroup/memory ] && [ -f /sys/fs/cgroup/memory/cgroup.procs ]; then
    echo "v1 /sys/fs/cgroup/memory/halo-cluster"
  else
    echo "none"
  fi
}

# Node $1's cgroup directory ("" when the machine has no memory cgroups).
cluster_cgroup() {
  local kind dir
  read -r kind dir <<< "$(cluster_cgroup_kind)"
  [ "$kind" = none ] && return 0
  echo "$dir/$HALO_CLUSTER/$1"
}

# The processes of node $1 (every process in its cgroup).
cluster_node_pids() {
  local cg
  cg=$(cluster_cgroup "$1")
  [ -n "$cg" ] && [ -f "$cg/cgroup.procs" ] && cat "$cg/cgroup.procs"
  return 0
}

# Kills every process of node $1 (SIGKILL), repeating until the cgroup is empty (a process may
# fork while we kill). Returns when none is left, or after 10 s.
cluster_kill_node() {
  local cg pids i
  cg=$(cluster_cgroup "$1")
  [ -n "$cg" ] && [ -d "$cg" ] || return 0
  if [ -f "$cg/cgroup.kill" ]; then echo 1 > "$cg/cgroup.kill"; fi
  for i in $(seq 200); do
    pids=$(cat "$cg/cgroup.procs" 2> /dev/null)
    [ -z "$pids" ] && return 0
    kill -9 $pids 2> /dev/null
    sleep 0.05
  done
  echo "cluster: processes of $1 still alive after 10 s: $pids" >&2
  return 1
}

# Loads cluster.env (fails when the cluster does not exist).
cluster_load() {
  [ -f "$CLUSTER_ROOT/cluster.env" ] || cluster_die "no cluster '$HALO_CLUSTER' at $CLUSTER_ROOT (run tools/cluster/up.sh N first)"
  # shellcheck disable=SC1091
  . "$CLUSTER_ROOT/cluster.env"
}

# Bytes from a size such as 512M, 2G, 1.5G or 1048576.
cluster_bytes() {
  local s=$1
  case "$s" in
    *[kK]) awk -v x="${s%?}" 'BEGIN { printf "%.0f", x * 1024 }' ;;
    *[mM]) awk -v x="${s%?}" 'BEGIN { printf "%.0f", x * 1048576 }' ;;
    *[gG]) awk -v x="${s%?}" 'BEGIN { printf "%.0f", x * 1073741824 }' ;;
    *[0-9]) echo "$s" ;;
    *) cluster_die "'$s': expected a size such as 512M or 2G" ;;
  esac
}
