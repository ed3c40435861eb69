#!/usr/bin/env bash
# Makes a cluster of N nodes on this machine: node1..nodeN, each a network namespace joined by a
# veth pair to a bridge (in a namespace of its own), with its own address on a private subnet
# that exists only inside these namespaces, its own host name, disk folder and memory cgroup,
# optionally a capped link; writes an Open MPI hostfile and cluster.env. Needs root.
#
#   up.sh N [--slots S] [--mem-per-node SIZE] [--link-rate RATE] [--cpus-per-node C]
#           [--mem-per-node-list L] [--link-rate-list L] [--cpus-per-node-list L]
#
# --slots S            ranks per node in the hostfile (default 1)
# --mem-per-node SIZE  memory limit of each node's cgroup (e.g. 2G); default none
# --mem-per-node-list  SIZE1,SIZE2,... one limit per node ("-" for none)
# --link-rate RATE     cap each node's link in both directions with tbf (e.g. 1gbit, 10gbit)
# --link-rate-list     RATE1,RATE2,... one cap per node ("-" for none): an uneven cluster
# --cpus-per-node C    CPU quota of each node (cpu cgroup, e.g. 0.5); default none
# --cpus-per-node-list C1,C2,... one quota per node ("-" for none), e.g. 0.8,0.4,0.4
# Environment: HALO_CLUSTER (name, default halo), CLUSTER_ROOT (default /tmp/halo-cluster-NAME).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

n=${1:-}
[[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || cluster_die "usage: up.sh N [--slots S] [--mem-per-node SIZE] [--link-rate RATE] [--cpus-per-node C] (1 <= N <= 200)"
shift
slots=1 mem="" mem_list="" rate="" rate_list="" cpus="" cpus_list=""
while [ $# -gt 0 ]; do
  case "$1" in
    --slots) slots=${2:?}; shift 2 ;;
    --mem-per-node) mem=${2:?}; shift 2 ;;
    --mem-per-node-list) mem_list=${2:?}; shift 2 ;;
    --link-rate) rate=${2:?}; shift 2 ;;
    --link-rate-list) rate_list=${2:?}; shift 2 ;;
    --cpus-per-node) cpus=${2:?}; shift 2 ;;
    --cpus-per-node-list) cpus_list=${2:?}; shift 2 ;;
    *) cluster_die "up.sh: unknown option '$1'" ;;
  esac
done
[[ "$slots" =~ ^[1-9][0-9]*$ ]] || cluster_die "--slots '$slots': expected a positive integer"
why=$(cluster_unavailable_reason)
[ -z "$why" ] || cluster_die "cannot make a cluster on this machine: $why"
read -r cg_kind cg_base <<< "$(cluster_cgroup_kind)"
if [ "$cg_kind" = none ] && { [ -n "$mem" ] || [ -n "$mem_list" ] || [ -n "$cpus" ] || [ -n "$cpus_list" ]; }; then
  cluster_die "--mem-per-node/--cpus-per-node need memory/cpu cgroups, which this machine lacks"
fi

# A cluster of this name left behind by a failed run goes first.
if [ -f "$CLUSTER_ROOT/cluster.env" ] || ip netns list | grep -q "^$(cluster_bridge_ns)\b"; then
  "$CLUSTER_TOOLS/down.sh" > /dev/null 2>&1 || true
fi
mkdir -p "$CLUSTER_ROOT/data"
# The anchor: a process that stays in the namespaces this script runs in, so that exec.sh can
# return to them from inside a node (the launch agent starts node2's daemon from node1).
setsid sleep infinity < /dev/null > /dev/null 2>&1 &
echo $! > "$CLUSTER_ROOT/anchor.pid"
: > "$CLUSTER_ROOT/hostfile"

br=$(cluster_bridge_ns)
ip netns add "$br"
ip -n "$br" link set lo up
ip -n "$br" link add br0 type bridge
ip -n "$br" link set br0 up

IFS=, read -r -a mems <<< "$mem_list"
IFS=, read -r -a rates <<< "$rate_list"
IFS=, read -r -a cpus_each <<< "$cpus_list"
for c in "${cpus_each[@]}"; do
  [ "$c" = - ] || [[ "$c" =~ ^[0-9]*\.?[0-9]+$ ]] || cluster_die "--cpus-per-node-list: '$c' is not a number of CPUs"
done
hosts="127.0.0.1 localhost"$'\n'
for i in $(seq "$n"); do hosts+="$(cluster_addr "node$i") node$i"$'\n'; done

for i in $(seq "$n"); do
  node=node$i ns=$(cluster_ns "node$i")
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$br" link add "n$i" type veth peer name eth0 netns "$ns"
  ip -n "$br" link set "n$i" master br0 up
  ip -n "$ns" addr add "$(cluster_addr "$node")/24" dev eth0
  ip -n "$ns" link set eth0 up
  # TCP gives up on unacknowledged data after ~6 s instead of Linux's default ~15 min
  # (tcp_retries2=15): Open MPI's launcher learns of a dead link only from TCP, and would wait
  # that long for the lost node's daemon (docs/DISTRIBUTED.md says the same for real hosts).
  ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=4
  node_rate=${rates[$((i - 1))]:-$rate}
  [ "$node_rate" = - ] && node_rate=""
  if [ -n "$node_rate" ]; then
    # tbf on both ends: eth0's egress is the node's upload, n$i's egress (towards the node) its
    # download. The burst must hold a whole GSO segment (64 KiB) or tbf drops it; a 1 ms
    # burst at the rate, at least 256 KiB, keeps the average at the rate.
    burst=$(awk -v r="$node_rate" 'BEGIN {
      m = 1; if (r ~ /[gG]bit$/) m = 1e9; else if (r ~ /[mM]bit$/) m = 1e6; else if (r ~ /[kK]bit$/) m = 1e3;
      v = r; sub(/[a-zA-Z]+$/, "", v); b = v * m / 8 / 1000; if (b < 262144) b = 262144; printf "%d", b }')
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$node_rate" burst "$burst" latency 100ms
    ip netns exec "$br" tc qdisc add dev "n$i" root tbf rate "$node_rate" burst "$burst" latency 100ms
  fi
  mkdir -p "/etc/netns/$ns"
  printf '%s' "$hosts" > "/etc/netns/$ns/hosts"
  mkdir -p "$CLUSTER_ROOT/disks/$node/tmp"
  echo "$node slots=$slots" >> "$CLUSTER_ROOT/hostfile"
  if [ "$cg_kind" != none ]; then
    cg=$(cluster_cgroup "$node")
    if [ "$cg_kind" = v2 ]; then
      mkdir -p "$cg_base/$HALO_CLUSTER"
      echo +memory > "$cg_base/cgroup.subtree_control" 2> /dev/null || true
      echo +memory > "$cg_base/$HALO_CLUSTER/cgroup.subtree_control" 2> /dev/null || true
      [ -n "$cpus$cpus_list" ] && { echo +cpu > "$cg_base/cgroup.subtree_control"; echo +cpu > "$cg_base/$HALO_CLUSTER/cgroup.subtree_control"; }
    fi
    mkdir -p "$cg"
    limit=${mems[$((i - 1))]:-$mem}
    [ "$limit" = - ] && limit=""
    if [ -n "$limit" ]; then
      bytes=$(cluster_bytes "$limit")
      if [ "$cg_kind" = v2 ]; then
        echo "$bytes" > "$cg/memory.max"
        echo 0 > "$cg/memory.swap.max" 2> /dev/null || true
      else
        echo "$bytes" > "$cg/memory.limit_in_bytes"
        echo 0 > "$cg/memory.swappiness" 2> /dev/null || true
      fi
    fi
    node_cpus=${cpus_each[$((i - 1))]:-$cpus}
    [ "$node_cpus" = - ] && node_cpus=""
    if [ -n "$node_cpus" ]; then
      # A 10 ms period, not the kernel's 100 ms: a node over its quota is stopped until the
      # period ends, and 60 ms stops (0.4 CPU) stall every MPI handshake that needs the node's
      # process, which makes exchanges 10x slower than on a slower CPU (measured on the
      # arxiv-sized graph, 3 nodes at 0.8/0.4/0.4: halo wait 6.4 s an epoch at 100 ms).
      quota=$(awk -v c="$node_cpus" 'BEGIN { printf "%d", c * 10000 }')
      if [ "$cg_kind" = v2 ]; then
        echo "$quota 10000" > "$cg/cpu.max"
      else
        cpucg=/sys/fs/cgroup/cpu/halo-cluster/$HALO_CLUSTER/$node
        mkdir -p "$cpucg"
        echo 10000 > "$cpucg/cpu.cfs_period_us"
        echo "$quota" > "$cpucg/cpu.cfs_quota_us"
      fi
    fi
  fi
done

cat > "$CLUSTER_ROOT/cluster.env" <<ENV
CLUSTER_NODES=$n
CLUSTER_SLOTS=$slots
CLUSTER_MEM='$mem${mem_list:+ ($mem_list)}'
CLUSTER_LINK_RATE='$rate${rate_list:+ ($rate_list)}'
CLUSTER_CPUS='$cpus${cpus_list:+ ($cpus_list)}'
CLUSTER_CGROUP_KIND=$cg_kind
ENV
echo "cluster '$HALO_CLUSTER': $n nodes (node1..node$n, $slots slot(s) each) on $CLUSTER_SUBNET_PREFIX.0/24${rate:+, links $rate}${rate_list:+, links $rate_list}${mem:+, memory $mem per node}${mem_list:+, memory $mem_list}${cpus:+, $cpus CPUs per node}${cpus_list:+, CPUs $cpus_list}"
echo "  disks: $CLUSTER_ROOT/disks/nodeK (seen as $CLUSTER_ROOT/data on node K); hostfile: $CLUSTER_ROOT/hostfile"
