#!/usr/bin/env bash
# `make demo`: the main job on the bundled Cora: convert the OGB-layout directory to a native
# dataset, summarise it, partition it for 2 ranks with the quality report, and train the
# published 2-layer GCN (Kipf & Welling) on one process, printing the final accuracy.
# (Training across the 2 parts with mpirun joins when the distributed runtime lands.)
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
echo "== halo train $out/cora --preset planetoid-gcn"
"$halo" train "$out/cora" --preset planetoid-gcn --eval-every 20 --log "$out/cora-train.jsonl"
