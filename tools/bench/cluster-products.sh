#!/usr/bin/env bash
# A graph larger than any one node: the generated ogbn-products-sized graph with locality
# (2,449,029 nodes, 61,859,140 edges, 100 features, 47 classes, `--locality 0.95`), METIS into 4
# parts, trained 3 epochs of the ogbn-products-gcn preset (3 x 256) by 4 nodes of a cluster in a
# box (tools/cluster) whose memory limit each is at most half of what one process needs; the
# losses are compared with one process's. Prints one process's peak, the limit, every rank's
# owned and halo rows and peak memory, and the three losses of both runs. Needs root and ~24 GiB.
#
#   tools/bench/cluster-products.sh [WORKDIR] [LIMIT_FRACTION]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${BIN:-build/bin}")
work=${1:-/tmp/halo-bench}
fraction=${2:-0.5}
export HALO_CLUSTER=${HALO_CLUSTER:-products} CLUSTER_ROOT=${CLUSTER_ROOT:-$work/products-cluster}
mkdir -p "$work"
ds=$work/products-loc
[[ -d $ds ]] || "$bin/halo" generate -o "$ds" --nodes 2449029 --edges 61859140 --features 100 --classes 47 --seed 1 \
  --locality 0.95 --community-size 10000
parts=$work/products-loc-4
[[ -d $parts ]] || "$bin/halo" partition "$ds" -k 4 -o "$parts" > "$parts.out"
common=(--preset ogbn-products-gcn --epochs 3 --eval-every 3 -q)
if [[ ! -f $work/products-one.jsonl ]] || ! tail -1 "$work/products-one.jsonl" | grep -q summary; then
  "$bin/halo" train "$ds" "${common[@]}" --threads 2 --log "$work/products-one.jsonl" > "$work/products-one.out" 2>&1
fi
one_mb=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["peak_rss_mb"])' "$work/products-one.jsonl")
limit_mb=$(python3 -c "print(int($one_mb * $fraction))")
trap '"$here/../cluster/down.sh" > /dev/null 2>&1' EXIT
"$here/../cluster/up.sh" 4 --mem-per-node "${limit_mb}M"
"$here/../cluster/deploy.sh" "$parts" > /dev/null
"$here/../cluster/run.sh" -- mpirun -np 4 -x OMP_NUM_THREADS=1 "$bin/halo" train "$CLUSTER_ROOT/data/products-loc-4" \
  "${common[@]}" --threads 1 --log "$work/products-cluster.jsonl" 2>&1 | tee "$work/products-cluster.out" | tail -4
python3 - "$work/products-one.jsonl" "$work/products-cluster.jsonl" "$one_mb" "$limit_mb" <<'PY'
import json, sys
one = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
four = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
print(f"one process: peak {float(sys.argv[3]) / 1024:.2f} GiB; node memory limit {int(sys.argv[4]) / 1024:.2f} GiB")
s = four[-1]
for r, (o, h, m) in enumerate(zip(s["rank_owned_rows"], s["rank_halo_rows"], s["rank_peak_rss_mb"])):
    print(f"rank {r}: {o} owned + {h} halo rows (halo/owned {h / o:.2f}), peak {m / 1024:.2f} GiB")
worst = 0
for a, b in zip([r for r in one if r["type"] == "epoch"], [r for r in four if r["type"] == "epoch"]):
    d = abs(a["loss"] - b["loss"]) / abs(a["loss"])
    worst = max(worst, d)
    print(f"epoch {a['epoch']}: loss one process {a['loss']:.6f}, 4 nodes {b['loss']:.6f} (rel. diff {d:.1e})")
print("losses within 1e-4:", worst < 1e-4)
PY
