#!/usr/bin/env bash
# Copies a partitioned dataset to the nodes, each node getting only what its ranks read: the
# parts' meta.json and the part-r/ folders of the ranks it runs (rank r runs on node r/S + 1 for
# S slots per node), plus original_ids.bin on rank 0's node when the dataset was reordered —
# what docs/DISTRIBUTED.md tells a user to rsync. On node K the copy is at
# CLUSTER_ROOT/data/NAME (NAME: the PARTS folder's name unless given).
#
#   deploy.sh PARTS [NAME]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster_load
parts=${1:?usage: deploy.sh PARTS [NAME]}
[ -f "$parts/meta.json" ] || cluster_die "$parts: not a partitioned dataset (no meta.json)"
name=${2:-$(basename "$parts")}
k=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["k"])' "$parts/meta.json")
[ "$k" -le $((CLUSTER_NODES * CLUSTER_SLOTS)) ] ||
  cluster_die "$parts has $k parts but the cluster has $CLUSTER_NODES nodes x $CLUSTER_SLOTS slots"
for i in $(seq "$CLUSTER_NODES"); do rm -rf "$CLUSTER_ROOT/disks/node$i/$name"; done
for r in $(seq 0 $((k - 1))); do
  node=node$((r / CLUSTER_SLOTS + 1))
  dest=$CLUSTER_ROOT/disks/$node/$name
  [ -d "$parts/part-$r" ] || cluster_die "$parts: part-$r is missing"
  mkdir -p "$dest"
  cp "$parts/meta.json" "$dest/"
  cp -r "$parts/part-$r" "$dest/"
  if [ "$r" = 0 ] && [ -f "$parts/original_ids.bin" ]; then cp "$parts/original_ids.bin" "$dest/"; fi
  echo "part-$r -> $node:$CLUSTER_ROOT/data/$name"
done
