#!/usr/bin/env bash
# Edge cut and communication volume of every method on small real graphs and a generated one,
# side by side (METIS k-way = the default, METIS --ptype best, Fennel, random, contiguous) at
# K = 2, 4, 8.
#   tools/bench/partition-quality.sh [WORKDIR]
set -euo pipefail
halo=$(realpath "${HALO:-build/bin/halo}")
work=${1:-/tmp/halo-bench-quality}
mkdir -p "$work"
"$halo" convert datasets/cora -o "$work/cora" --force 2>/dev/null
"$halo" convert datasets/metis/4elt.graph -o "$work/4elt" --force 2>/dev/null
"$halo" generate -o "$work/sbm-100k" --nodes 100000 --avg-degree 20 --features 8 --classes 16 --seed 1 --force 2>/dev/null
printf "%-10s %3s %22s %22s %22s %22s %22s\n" graph K "metis cut / vol" "metis best cut / vol" \
  "fennel cut / vol" "random cut / vol" "contiguous cut / vol"
for g in cora 4elt sbm-100k; do
  for k in 2 4 8; do
    row=""
    for m in metis best fennel random contiguous; do
      if [ "$m" = best ]; then how=(--method metis --ptype best); else how=(--method "$m"); fi
      "$halo" partition "$work/$g" -k "$k" -o "$work/p" "${how[@]}" --force > /dev/null 2>&1
      row+=$("$halo" info "$work/p" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%22s" % ("%d / %d" % (j["edge_cut"], j["comm_volume"])), end="")')" "
    done
    printf "%-10s %3s %s\n" "$g" "$k" "$row"
  done
done
