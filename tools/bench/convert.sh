#!/usr/bin/env bash
# Benchmark: `halo convert` on an OGB raw directory made by `halo generate --format ogb`.
# Prints wall time, decompressed-text throughput, peak RSS, the native dataset's size on disk,
# and two ratios: peak RSS / dataset size (target <= 2) and throughput against `gzip -dc`
# decompressing the same files in the same run (the floor any gzip-text reader pays).
#
#   tools/bench/convert.sh [WORKDIR] [SIZE]    SIZE = products (default) | arxiv | small
set -euo pipefail
halo=${HALO:-build/bin/halo}
work=${1:-/tmp/halo-bench}
size=${2:-products}
case $size in
  products) args=(--nodes 2449029 --edges 61859140 --features 100 --classes 47) ;;  # ogbn-products
  arxiv)    args=(--nodes 169343 --edges 1166243 --features 128 --classes 40) ;;     # ogbn-arxiv
  small)    args=(--nodes 100000 --edges 1000000 --features 32 --classes 10) ;;
  *) echo "unknown size $size" >&2; exit 2 ;;
esac
mkdir -p "$work"
src=$work/$size-ogb
dst=$work/$size-native
if [[ ! -d $src ]]; then
  echo "generating $src ..." >&2
  "$halo" generate -o "$src" --format ogb --seed 1 "${args[@]}"
fi
rm -rf "$dst"
sync
# Baseline: decompression alone, same files, same run.
t0=$(date +%s.%N)
gzip -dc "$src"/raw/*.csv.gz "$src"/split/*/*.csv.gz | wc -c > "$work/text_bytes"
t1=$(date +%s.%N)
report=$("$halo" convert "$src" -o "$dst" --json)
echo "$report" > "$work/convert-report.json"
disk=$(du -sb "$dst" | cut -f1)
python3 - "$report" "$disk" "$(cat "$work/text_bytes")" "$t0" "$t1" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); disk = int(sys.argv[2]); text = int(sys.argv[3])
gz_s = float(sys.argv[5]) - float(sys.argv[4])
mbps = r["text_bytes"] / r["seconds"] / 1e6
gz_mbps = text / gz_s / 1e6
print(f"nodes {r['nodes']}, stored edges {r['edges']}")
print(f"decompressed text   {r['text_bytes']/1e9:.2f} GB")
print(f"convert wall time   {r['seconds']:.1f} s")
print(f"throughput          {mbps:.0f} MB/s of text   (target >= 100)")
print(f"baseline gzip -dc   {gz_mbps:.0f} MB/s ({gz_s:.1f} s)  -> convert / gzip = {mbps/gz_mbps:.2f}")
print(f"peak RSS            {r['peak_rss_bytes']/2**30:.2f} GiB")
print(f"dataset on disk     {disk/2**30:.2f} GiB")
print(f"peak RSS / dataset  {r['peak_rss_bytes']/disk:.2f}   (target <= 2)")
PY
