#!/usr/bin/env bash
# `make demo`: the main job on the bundled Cora. Today: convert the OGB-layout directory to a
# native dataset, summarise it, and partition it for 2 ranks with the quality report.
# (Multi-rank training joins when it lands.)
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
