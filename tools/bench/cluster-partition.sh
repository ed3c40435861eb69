#!/usr/bin/env bash
# The distributed partitioner on a cluster in a box: `halo partition --method ptscotch` cuts the
# ogbn-products-sized graph (2,449,029 nodes, 61,859,140 edges, 100 features, 47 classes, the
# recipe of docs/BENCHMARKS.md; with LOCALITY, e.g. 0.95, the variant generated with
# `--locality LOCALITY --community-size 10000`, which partitions like a real graph) into K parts
# on NODES nodes of tools/cluster, one rank each,
# over TCP, each node's memory cgroup (page cache included) limited to LIMIT. Every node holds
# the dataset on its own disk (hard links: one copy on this machine's disk, read by each node
# only in its slice); PARTS goes to a folder every node sees (WORKDIR), as on a cluster's shared
# file system. Prints the run's report, every node's peak (the cgroup's max usage) and OOM
# count, the ranks' own peaks, and METIS's cut and peak in one process for the same K (from
# WORKDIR/NAME-metis-K.out, made once). Needs root and ~16 GiB.
#
#   tools/bench/cluster-partition.sh [WORKDIR] [NODES] [LIMIT] [K] [LOCALITY]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${BIN:-build/bin}")
work=${1:-/tmp/halo-bench}
nodes=${2:-4}
limit=${3:-3G}
k=${4:-8}
locality=${5:-}
export HALO_CLUSTER=${HALO_CLUSTER:-ptscotch} CLUSTER_ROOT=${CLUSTER_ROOT:-$work/ptscotch-cluster}
mkdir -p "$work"
work=$(realpath "$work")
name=products-native${locality:+-loc$locality}
ds=$work/$name
[[ -d $ds ]] || "$bin/halo" generate -o "$ds" --nodes 2449029 --edges 61859140 --features 100 \
  --classes 47 --seed 1 ${locality:+--locality "$locality" --community-size 10000}
metis_out=$work/$name-metis-$k.out
if [[ ! -f $metis_out ]]; then
  /usr/bin/time -v "$bin/halo" partition "$ds" -k "$k" -o "$work/parts-metis-$k" --force \
    > "$metis_out" 2>&1
  rm -rf "$work/parts-metis-$k"
fi
# The binary is copied: the nodes run it while the build tree may change.
mkdir -p "$work/cluster-bin"
cp "$bin/halo" "$work/cluster-bin/halo"
trap '"$here/../cluster/down.sh" > /dev/null 2>&1' EXIT
"$here/../cluster/up.sh" "$nodes" --mem-per-node "$limit"
read -r cg_kind cg_base <<< "$(. "$here/../cluster/lib.sh"; cluster_cgroup_kind)"
for i in $(seq "$nodes"); do cp -rlL "$ds" "$CLUSTER_ROOT/disks/node$i/products"; done
out=$work/parts-ptscotch-cluster
rm -rf "$out"
start=$(date +%s.%N)
"$here/../cluster/run.sh" -- mpirun -np "$nodes" -x OMP_NUM_THREADS=1 "$work/cluster-bin/halo" \
  partition "$CLUSTER_ROOT/data/products" -k "$k" -o "$out" --method ptscotch \
  2>&1 | tee "$work/ptscotch-cluster.out" | tail -3
wall=$(python3 -c "import time; print(f'{time.time() - $start:.0f}')")
echo "wall ${wall} s on $nodes nodes, memory limit $limit each"
for i in $(seq "$nodes"); do
  cg=$cg_base/$HALO_CLUSTER/node$i
  if [ "$cg_kind" = v2 ]; then
    peak=$(cat "$cg/memory.peak" 2> /dev/null || echo 0)
    ooms=$(awk '/^oom_kill /{print $2}' "$cg/memory.events")
  else
    peak=$(cat "$cg/memory.max_usage_in_bytes")
    ooms=$(awk '/^oom_kill /{print $2}' "$cg/memory.oom_control")
  fi
  awk -v n="$i" -v p="$peak" -v o="${ooms:-0}" \
    'BEGIN { printf "node%d: cgroup peak %.2f GiB (page cache included), OOM kills %d\n", n, p / 2^30, o }'
done
python3 - "$out/meta.json" "$metis_out" <<'PY'
import json, re, sys
m = json.load(open(sys.argv[1]))
peaks = m["peak_rss_bytes_per_rank"]
print("ranks' peak RSS (GiB):", " ".join(f"{p / 2**30:.2f}" for p in peaks))
print(f"ptscotch: edge cut {m['edge_cut']:,}, comm volume {m['comm_volume']:,}, "
      f"balance {m['balance']['nodes']:.3f}")
metis = open(sys.argv[2]).read()
cut = int(re.search(r"edge cut (\d+)", metis).group(1))
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", metis).group(1)) * 1024
print(f"metis, one process: edge cut {cut:,}, peak {rss / 2**30:.2f} GiB")
print(f"ptscotch / metis: cut {m['edge_cut'] / cut:.3f}, largest rank peak {max(peaks) / rss:.3f}")
PY
