#!/usr/bin/env bash
# `make demo`: the main job on the bundled Cora: convert the OGB-layout directory to a native
# dataset, summarise it, partition it for 2 ranks with the quality report, and train the
# published 2-layer GCN (Kipf & Welling) across the 2 parts with mpirun, printing the final
# accuracy and the communication figures.
set -euo pipefail
halo=${1:-build/bin/halo}
out=${DEMO_DIR:-build/demo}
mkdir -p "$out"
echo "== halo convert datasets/cora -> $out/cora"
"$halo" convert datasets/cora -o "$out/cora" --force
echo
echo "== halo info $out/cora"
"$halo" info "$out/cora"
echo
echo "== halo partition $out/cora -k 2 -> $out/cora-2parts"
"$halo" partition "$out/cora" -k 2 -o "$out/cora-2parts" --force
echo
# mpirun refuses to start as root unless told; --oversubscribe lets 2 ranks share 1 core.
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "== mpirun -np 2 halo train $out/cora-2parts --preset planetoid-gcn --runs 10 (seeds 0-9, the published protocol)"
mpirun --oversubscribe --bind-to none -np 2 "$halo" train "$out/cora-2parts" --preset planetoid-gcn \
  --runs 10 --quiet --log "$out/cora-train.jsonl"
