#!/usr/bin/env bash
# Benchmark: parts sized by measured speed on an uneven cluster. The generated ogbn-arxiv-sized
# graph (169,343 nodes, 1,166,243 edges, 128 features, 40 classes), the ogbn-arxiv-gcn preset
# (3 x 256, batch norm), on a cluster in a box (tools/cluster) of one node per CPU quota in CPUS
# (default 0.8,0.4,0.4: shares 1 : 0.5 : 0.5, with 0.4 of this machine's 2 cores left for the
# kernel's TCP work and the launcher), 1 rank of 1 thread per node, links capped at RATES (one
# per node, "-" for none; default none). Per round, interleaved:
#   single   one process on one node at each distinct quota, the whole graph: its speed;
#   equal    METIS parts of equal size;
#   auto     `halo train --calibrate` on the cluster, then `halo partition --part-weights
#            auto=TABLE` (METIS with the searched shares);
#   compute  the same table's compute speeds alone as shares (the search's first round: what
#            the exchange term of the model is worth).
# Ideal epoch = total work / total speed = 1 / sum over nodes of 1 / (single epoch at its quota).
# Prints per run the median epoch (epochs 2..E), the slowest rank's compute, halo wait and
# all-reduce, the parts' shares, and the ratios; then the medians over rounds. Needs root.
#
# LOCALITY=0.95 uses the graph generated with `--locality 0.95 --community-size 10000` (which
# partitions like a real graph: a tenth of the halo); FLAGS adds training flags to every run
# (e.g. FLAGS="--halo-staleness 1").
#
#   [LOCALITY=P] [FLAGS=...] tools/bench/hetero.sh [WORKDIR] [EPOCHS] [ROUNDS] [CPUS] [RATES]
#   e.g. tools/bench/hetero.sh /tmp/bench 6 3 0.8,0.4,0.4
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${BIN:-build/bin}")
work=${1:-/tmp/halo-bench}
epochs=${2:-8}
rounds=${3:-3}
cpus=${4:-0.8,0.4,0.4}
rates=${5:-}
export HALO_CLUSTER=${HALO_CLUSTER:-hetero} CLUSTER_ROOT=${CLUSTER_ROOT:-$work/hetero-cluster}
locality=${LOCALITY:-}
tag=${locality:+-loc$locality}${FLAGS:+-$(echo "$FLAGS" | tr -c 'a-z0-9' '_')}
mkdir -p "$work/hetero$tag"
work=$(realpath "$work")
out=$work/hetero$tag
ds=$work/arxiv-native${locality:+-loc$locality}
[[ -d $ds ]] || "$bin/halo" generate -o "$ds" --nodes 169343 --edges 1166243 --features 128 --classes 40 --seed 1 \
  ${locality:+--locality "$locality" --community-size 10000}
IFS=, read -r -a quota <<< "$cpus"
k=${#quota[@]}
# The binary is copied: the nodes run it while the build tree may change.
mkdir -p "$out/bin"
cp "$bin/halo" "$out/bin/halo"
halo=$out/bin/halo
# shellcheck disable=SC2206
train_flags=(--preset ogbn-arxiv-gcn --epochs "$epochs" --eval-every 1000 --threads 1 -q ${FLAGS:-})
trap '"$here/../cluster/down.sh" > /dev/null 2>&1' EXIT

# median epoch, slowest compute / halo wait / all-reduce of a log (epochs 2.., as cluster.sh)
summary() {
  python3 - "$1" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ep = [r for r in recs if r["type"] == "epoch" and r["epoch"] > 1]
med = statistics.median
slow = lambda key: med([max(x[key] for x in r["ranks"]) for r in ep]) if "ranks" in ep[0] else 0.0
print(f"{med([r['epoch_time_s'] for r in ep]):.4f} {slow('compute_s'):.4f} {slow('halo_wait_s'):.4f} {slow('allreduce_s'):.4f}")
PY
}
shares() {  # the parts' achieved shares of the nodes
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(":".join("%.3f" % p["share"] for p in m["parts"]))' "$1/meta.json"
}

declare -A single
results=$out/results.txt
: > "$results"
for round in $(seq "$rounds"); do
  # Single-node runs: the speed of each distinct quota on the whole graph.
  for q in $(printf '%s\n' "${quota[@]}" | sort -u); do
    "$here/../cluster/up.sh" 1 --cpus-per-node-list "$q" > /dev/null
    log=$out/single-$q-$round.jsonl
    rm -f "$log"
    "$here/../cluster/exec.sh" node1 "$halo" train "$ds" "${train_flags[@]}" --log "$log" \
      > "$out/single-$q-$round.out" 2>&1
    read -r e _ <<< "$(summary "$log")"
    single[$q]=$e
    echo "round $round single $q $e" | tee -a "$results"
  done
  times=()
  for q in "${quota[@]}"; do times+=("${single[$q]}"); done
  ideal=$(python3 -c 'import sys; print(f"{1 / sum(1 / float(x) for x in sys.argv[1:]):.4f}")' "${times[@]}")
  echo "round $round ideal $ideal" | tee -a "$results"

  "$here/../cluster/up.sh" "$k" --cpus-per-node-list "$cpus" ${rates:+--link-rate-list "$rates"} > /dev/null
  for mode in equal auto compute; do
    parts=$out/parts-$mode
    if [[ $mode == equal ]]; then
      [[ -d $parts ]] || "$halo" partition "$ds" -k "$k" -o "$parts" > "$parts.out"
    elif [[ $mode == compute ]]; then
      w=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["speed_model"]["rounds"][0]; print(",".join("%.6f" % x for x in r["weights"]))' "$out/parts-auto/meta.json")
      "$halo" partition "$ds" -k "$k" -o "$parts" --force --part-weights "$w" > "$parts-$round.out"
    else
      # Calibrate on the cluster (every rank on its node, rank 0 writes the table on node1's
      # disk), then cut parts for it.
      "$here/../cluster/deploy.sh" "$out/parts-equal" cal > /dev/null
      "$here/../cluster/run.sh" -- mpirun -np "$k" -x OMP_NUM_THREADS=1 "$halo" train \
        "$CLUSTER_ROOT/data/cal" --preset ogbn-arxiv-gcn --threads 1 \
        --calibrate "$CLUSTER_ROOT/data/speed.json" > "$out/calibrate-$round.out" 2>&1
      cp "$CLUSTER_ROOT/disks/node1/speed.json" "$out/speed-$round.json"
      "$halo" partition "$ds" -k "$k" -o "$parts" --force \
        --part-weights "auto=$out/speed-$round.json" > "$parts-$round.out"
    fi
    "$here/../cluster/deploy.sh" "$parts" run > /dev/null
    log=$out/$mode-$round.jsonl
    rm -f "$log"
    "$here/../cluster/run.sh" -- mpirun -np "$k" -x OMP_NUM_THREADS=1 "$halo" train \
      "$CLUSTER_ROOT/data/run" "${train_flags[@]}" --log "$log" > "$out/$mode-$round.out" 2>&1
    echo "round $round $mode $(summary "$log") $(shares "$parts")" | tee -a "$results"
  done
done

python3 - "$results" "$cpus" "${rates:-none}" "$(basename "$ds") ${FLAGS:-}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = statistics.median
ideal = med([float(r[3]) for r in rows if r[2] == "ideal"])
print(f"\n{sys.argv[4]}: CPU quotas {sys.argv[2]}, links {sys.argv[3]}; medians over {len([r for r in rows if r[2] == 'ideal'])} rounds")
for q in sorted({r[3] for r in rows if r[2] == "single"}):
    print(f"single node at {q} CPU: epoch {med([float(r[4]) for r in rows if r[2] == 'single' and r[3] == q]):.3f} s")
print(f"ideal (total work / total speed): {ideal:.3f} s\n")
print("| parts | shares | epoch s | compute | halo wait | all-reduce | ÷ ideal | vs equal |")
print("|---|---|---|---|---|---|---|---|")
eq = med([float(r[3]) for r in rows if r[2] == "equal"])
for mode in ("equal", "auto", "compute"):
    rs = [r for r in rows if r[2] == mode]
    e = med([float(r[3]) for r in rs])
    cols = [med([float(r[i]) for r in rs]) for i in (4, 5, 6)]
    print(f"| {mode} | {rs[-1][7]} | {e:.3f} | {cols[0]:.3f} | {cols[1]:.3f} | {cols[2]:.3f} | {e / ideal:.2f} | {1 - e / eq:+.0%} |")
PY
