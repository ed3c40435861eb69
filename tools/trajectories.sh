#!/usr/bin/env bash
# Refactoring guard: record the CPU loss/metric trajectories of a fixed set of runs (Cora on 1 and
# 2 ranks, GCN and SAGE with batch norm, a checkpoint resume, UCI TGN on 1 and 2 ranks) with the
# timings stripped, so two builds can be diffed bit for bit:
#   tools/trajectories.sh build/bin/halo before.txt; ...change...; tools/trajectories.sh build/bin/halo after.txt
#   cmp before.txt after.txt
# Fixed thread count: float sums are only bit-stable for the same seed, threads and ranks.
set -euo pipefail
halo=${1:?usage: tools/trajectories.sh HALO OUT.txt}
out=${2:?usage: tools/trajectories.sh HALO OUT.txt}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
mpi="mpirun --oversubscribe --bind-to none -np 2"
export OMP_NUM_THREADS=1
# Keep the records' values, drop everything measured in time or memory.
strip() { python3 -c '
import json, sys
timed = ("time", "rss", "_s", "memory")
def keep(v):
    if isinstance(v, dict):
        return {k: keep(x) for k, x in v.items() if not any(t in k for t in timed)}
    if isinstance(v, list):
        return [keep(x) for x in v]
    return v
for line in open(sys.argv[1]):
    print(json.dumps(keep(json.loads(line)), sort_keys=True))
' "$1"; }
"$halo" convert datasets/cora -o "$work/cora" --force >/dev/null 2>&1
"$halo" partition "$work/cora" -k 2 -o "$work/cora-2" --force >/dev/null 2>&1
"$halo" convert datasets/uci-messages/graph.txt --format konect -o "$work/uci" --force >/dev/null 2>&1
run() {  # NAME CMD...: run it with --log and append its stripped records
  local name=$1; shift
  "$@" --log "$work/$name.jsonl" --quiet >/dev/null 2>&1
  { echo "== $name"; strip "$work/$name.jsonl"; } >>"$out"
}
: >"$out"
run cora-gcn-1 "$halo" train "$work/cora" --preset planetoid-gcn --runs 2 --threads 1
run cora-gcn-2 $mpi "$halo" train "$work/cora-2" --preset planetoid-gcn --runs 2 --threads 1
run cora-sage-bn-1 "$halo" train "$work/cora" --model sage --layers 3 --hidden 32 --batch-norm --input-dropout --epochs 30 --threads 1
run cora-sage-bn-2 $mpi "$halo" train "$work/cora-2" --model sage --layers 3 --hidden 32 --batch-norm --input-dropout --epochs 30 --threads 1
run cora-ckpt-a "$halo" train "$work/cora" --epochs 20 --checkpoint "$work/ck" --checkpoint-every 5 --threads 1
run cora-ckpt-b "$halo" train "$work/cora" --epochs 30 --checkpoint "$work/ck" --checkpoint-every 5 --resume --threads 1
run uci-tgn-1 "$halo" tgn train "$work/uci" --epochs 2 --threads 1
run uci-tgn-2 $mpi "$halo" tgn train "$work/uci" --epochs 2 --threads 1
run uci-tgn-ckpt-a "$halo" tgn train "$work/uci" --epochs 1 --checkpoint "$work/tck" --threads 1
run uci-tgn-ckpt-b "$halo" tgn train "$work/uci" --epochs 2 --checkpoint "$work/tck" --resume --threads 1
run uci-edgebank "$halo" tgn train "$work/uci" --model edgebank
echo "$(grep -c . "$out") records -> $out"
