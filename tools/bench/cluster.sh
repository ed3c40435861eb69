#!/usr/bin/env bash
# Benchmark: the network in the epoch. The generated ogbn-arxiv-sized graph (169,343 nodes,
# 1,166,243 edges, 128 features, 40 classes) in 4 METIS parts on a cluster in a box of 4 nodes x 1
# rank (NODES=2: 2 parts on 2 nodes) (tools/cluster: TCP between network namespaces, each node's link capped with tbf at the
# rate), the ogbn-arxiv-gcn preset (3 x 256, batch norm), for link rates and exchange modes
# (exact, --halo-dtype bf16, --halo-staleness 1, smooth: staleness with --halo-smoothing GAMMA,
# default 0.9). Per run: median epoch time, halo MB sent per
# epoch (all ranks), and the slowest rank's compute, halo wait and all-reduce; "wire s" is what
# a bytes / rate model predicts for the busiest node's link (its halo bytes, forward and
# backward, over the rate). Needs root. Logs stay in WORKDIR/cluster.
#
#   [NODES=4] [HALO_MPI_ARGS="-x VAR=..."] tools/bench/cluster.sh [WORKDIR] [EPOCHS] [RATES] [MODES]
#   e.g. tools/bench/cluster.sh /tmp/bench 10 "1gbit 10gbit 25gbit" "exact bf16 stale"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${BIN:-build/bin}")
work=${1:-/tmp/halo-bench}
epochs=${2:-10}
rates=${3:-1gbit 10gbit 25gbit}
modes=${4:-exact bf16 stale}
export HALO_CLUSTER=${HALO_CLUSTER:-bench} CLUSTER_ROOT=${CLUSTER_ROOT:-$work/cluster-root}
mkdir -p "$work/cluster"
ds=$work/arxiv-native
[[ -d $ds ]] || "$bin/halo" generate -o "$ds" --nodes 169343 --edges 1166243 --features 128 --classes 40 --seed 1
nodes=${NODES:-4}
parts=$work/cluster/arxiv-metis-$nodes
[[ -d $parts ]] || "$bin/halo" partition "$ds" -k "$nodes" -o "$parts" > "$parts.out"
trap '"$here/../cluster/down.sh" > /dev/null 2>&1' EXIT
printf '| link | mode | halo MB/epoch | epoch s | compute | halo wait | all-reduce | wire s (model) |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for rate in $rates; do
  "$here/../cluster/up.sh" "$nodes" --link-rate "$rate" > /dev/null
  "$here/../cluster/deploy.sh" "$parts" > /dev/null
  for mode in $modes; do
    case $mode in
      exact) flags="" ;;
      bf16) flags="--halo-dtype bf16" ;;
      stale) flags="--halo-staleness 1" ;;
      bf16-stale) flags="--halo-dtype bf16 --halo-staleness 1" ;;
      smooth) flags="--halo-staleness 1 --halo-smoothing ${GAMMA:-0.9}" ;;
      *) echo "unknown mode $mode" >&2; exit 2 ;;
    esac
    log=$work/cluster/$nodes-$rate-$mode.jsonl
    # shellcheck disable=SC2086
    "$here/../cluster/run.sh" -- mpirun -np "$nodes" -x OMP_NUM_THREADS=1 ${HALO_MPI_ARGS:-} "$bin/halo" train \
      "$CLUSTER_ROOT/data/arxiv-metis-$nodes" --preset ogbn-arxiv-gcn --epochs "$epochs" --eval-every 1000 --threads 1 -q \
      $flags --log "$log" > "$work/cluster/$nodes-$rate-$mode.out" 2>&1
    python3 - "$log" "$rate" "$mode" <<'PY'
import json, statistics, sys
log, rate, mode = sys.argv[1:4]
recs = [json.loads(l) for l in open(log) if l.strip()]
ep = [r for r in recs if r["type"] == "epoch" and r["epoch"] > 1]  # epoch 1 also exchanges layer 0's input
med = lambda xs: statistics.median(xs)
bits = float(rate.replace("gbit", "")) * 1e9 if rate.endswith("gbit") else float(rate.replace("mbit", "")) * 1e6
wire = med([max(x["halo_bytes"] for x in r["ranks"]) for r in ep]) * 8 / bits
slow = lambda key: med([max(x[key] for x in r["ranks"]) for r in ep])
print(f"| {rate} | {mode} | {med([r['halo_bytes'] for r in ep]) / 1e6:.1f} | {med([r['epoch_time_s'] for r in ep]):.3f} | "
      f"{slow('compute_s'):.3f} | {slow('halo_wait_s'):.3f} | {slow('allreduce_s'):.3f} | {wire:.3f} |")
PY
  done
done
