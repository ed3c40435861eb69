#!/usr/bin/env bash
# Benchmark: an ogbn-papers100M-sized graph (111 M nodes, 1.6 B undirected edges) or a fraction
# of it, generated, summarised, partitioned into K parts and written as parts on one machine.
# Each step runs in its own memory cgroup (v1) whose limit is the step's memory bound, page cache
# included, so a step that needed more would be killed, not just reported: generate and writing
# parts 16 GiB, `info` 8 GiB, Fennel 8 GiB. Per step: wall time, peak RSS (VmHWM: it counts the
# pages of the memory-mapped dataset the step touched, which the kernel may drop at will), peak
# anonymous memory (sampled every second from the cgroup) and the cgroup's OOM kills (0: the
# step fitted; reaching the limit by page cache only makes the kernel reclaim it).
#
#   tools/bench/massive.sh SCALE [WORKDIR] [K] [METHODS]
#     SCALE    1/64 | 1/16 | 1/4 | 1 (fraction of ogbn-papers100M's nodes and edges)
#     METHODS  space-separated (default "fennel"); each writes its parts, then they are removed
# Needs root (cgroups). The working set at SCALE 1 is ~22 GB of dataset plus ~20 GB of parts.
set -euo pipefail
halo=$(realpath "${HALO:-build/bin/halo}")
scale=${1:?usage: massive.sh SCALE [WORKDIR] [K] [METHODS]}
work=${2:-/tmp/halo-massive}
k=${3:-16}
methods=${4:-fennel}
read -r nodes edges < <(python3 -c "
from fractions import Fraction as F; s = F('$scale')
print(round(111059956 * s), round(1615685872 * s))")
tag=${scale/\//-}
ds=$work/papers-$tag
mkdir -p "$work"
cg_root=/sys/fs/cgroup/memory
[[ -w $cg_root ]] || { echo "massive.sh: needs root and cgroup v1 memory at $cg_root" >&2; exit 2; }

# step NAME LIMIT_GIB CMD...: runs CMD in a fresh memory cgroup of LIMIT_GIB; NAME.time (GNU time)
# NAME.out (output), NAME.anon (peak anonymous bytes), NAME.oom (the cgroup's OOM kills).
step() {
  local name=$1 limit=$2
  shift 2
  local cg=$cg_root/halo-massive-$$-$name
  mkdir "$cg"
  echo $((limit << 30)) > "$cg/memory.limit_in_bytes"
  sync
  echo 3 > /proc/sys/vm/drop_caches  # every step starts from a cold page cache
  (echo $BASHPID > "$cg/cgroup.procs" && exec /usr/bin/time -v -o "$work/$name.time" "$@") \
    > "$work/$name.out" 2>&1 &
  local pid=$! peak=0 rss rc=0
  while kill -0 "$pid" 2> /dev/null; do
    rss=$(awk '$1 == "total_rss" {print $2}' "$cg/memory.stat")
    ((rss > peak)) && peak=$rss
    sleep 1
  done
  wait "$pid" || rc=$?
  echo "$peak" > "$work/$name.anon"
  awk '$1 == "oom_kill" {print $2}' "$cg/memory.oom_control" > "$work/$name.oom"
  rmdir "$cg"
  if ((rc != 0)); then
    echo "massive.sh: step $name failed (exit $rc):" >&2
    tail -5 "$work/$name.out" >&2
    exit 1
  fi
}
wall() { awk -F': ' '/Elapsed/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$work/$1.time"; }
gib() { awk -v b="$1" 'BEGIN {printf "%.2f", b / 2^30}'; }
rss() { gib "$(awk -F': ' '/Maximum resident/ {print $2 * 1024}' "$work/$1.time")"; }
row() {  # row NAME LIMIT WHAT
  printf "%-28s %9.1f %9s %9s %7s %9s\n" "$3" "$(wall "$1")" "$(rss "$1")" \
    "$(gib "$(cat "$work/$1.anon")")" "$2" "$(cat "$work/$1.oom")"
}

echo "scale $scale of ogbn-papers100M: $nodes nodes, $edges undirected edges, K = $k"
df -h "$work" | tail -1
rm -rf "$ds" "$work"/parts-"$tag"-*
step "generate-$tag" 16 "$halo" generate -o "$ds" --nodes "$nodes" --edges "$edges" \
  --features 8 --classes 172 --locality 0.9 --seed 1
step "info-$tag" 8 "$halo" info "$ds"
results=()
for m in $methods; do
  out=$work/parts-$tag-$m
  limit=16
  [[ $m == fennel ]] && limit=8
  step "partition-$tag-$m" "$limit" "$halo" partition "$ds" -k "$k" -o "$out" --method "$m"
  results+=("$m $limit $(python3 -c "
import json; m = json.load(open('$out/meta.json')); s = m['seconds']
print(s['load'], s['partition'], $(wall "partition-$tag-$m") - s['load'] - s['partition'],
      m['edge_cut'], m['comm_volume'], m['balance']['nodes'])") $(du -sb "$out" | cut -f1)")
  rm -rf "$out"
done
dsbytes=$(du -sb "$ds" | cut -f1)

printf "\n%-28s %9s %9s %9s %7s %9s\n" "step" "wall s" "RSS GiB" "anon GiB" "limit" "OOM kills"
row "generate-$tag" 16 "generate"
row "info-$tag" 8 "info"
for r in "${results[@]}"; do
  read -r m limit _ <<< "$r"
  row "partition-$tag-$m" "$limit" "partition + write ($m)"
done
echo
echo "dataset on disk: $(gib "$dsbytes") GiB"
grep -E "^(edges|degree|components)" "$work/info-$tag.out" || true
printf "\n%-10s %8s %10s %8s %14s %14s %8s %10s\n" method "load s" "partition" "write s" \
  "edge cut" "comm volume" balance "parts GiB"
for r in "${results[@]}"; do
  read -r m _ load part write cut vol bal bytes <<< "$r"
  printf "%-10s %8.1f %10.1f %8.1f %14s %14s %8.3f %10s\n" "$m" "$load" "$part" "$write" "$cut" \
    "$vol" "$bal" "$(gib "$bytes")"
done
