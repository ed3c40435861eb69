#!/usr/bin/env bash
# `make demo`: the main job on the bundled Cora. Today: convert the OGB-layout directory to a
# native dataset and summarise it. (Partitioning and multi-rank training join as they land.)
set -euo pipefail
halo=${1:-build/bin/halo}
out=${DEMO_DIR:-build/demo}
mkdir -p "$out"
echo "== halo convert datasets/cora -> $out/cora"
"$halo" convert datasets/cora -o "$out/cora" --force
echo
echo "== halo info $out/cora"
"$halo" info "$out/cora"
