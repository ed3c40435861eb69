#!/usr/bin/env bash
# Benchmark: `halo partition -k K` on an ogbn-products-sized dataset against plain gpmetis on
# the same graph (exported as a METIS file), in the same run, plus Fennel, random and, when
# HALO_PYTHON (else python3) has KaMinPar's package (tools/install-kaminpar.sh), KaMinPar.
# Prints wall time, peak RSS and edge cut of each, and halo/gpmetis ratios (targets <= 1.25).
#
#   tools/bench/partition.sh [WORKDIR] [K]      (uses WORKDIR/products-native from convert.sh)
set -euo pipefail
halo=$(realpath "${HALO:-build/bin/halo}")
work=${1:-/tmp/halo-bench}
k=${2:-8}
ds=$work/products-native
if [[ ! -d $ds ]]; then
  echo "missing $ds: run tools/bench/convert.sh $work first" >&2
  exit 2
fi
cd "$work"
[[ -f products.graph ]] || "$halo" export "$ds" -o products.graph
measure() {  # measure NAME CMD... -> NAME.time (GNU time -v output)
  local name=$1
  shift
  sync
  /usr/bin/time -v -o "$name.time" "$@" > "$name.out" 2>&1
}
wall() { awk -F': ' '/Elapsed/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$1.time"; }
rss() { awk -F': ' '/Maximum resident/ {print $2/1048576}' "$1.time"; }
methods=(metis fennel random)
"${HALO_PYTHON:-python3}" -c 'import kaminpar, numpy' 2> /dev/null && methods+=(kaminpar)
rm -rf parts-metis parts-fennel parts-random parts-kaminpar
measure gpmetis gpmetis -seed=0 products.graph "$k"
measure metis "$halo" partition "$ds" -k "$k" -o parts-metis --method metis
measure fennel "$halo" partition "$ds" -k "$k" -o parts-fennel --method fennel
measure random "$halo" partition "$ds" -k "$k" -o parts-random --method random
[[ " ${methods[*]} " == *" kaminpar "* ]] &&
  measure kaminpar "$halo" partition "$ds" -k "$k" -o parts-kaminpar --method kaminpar
gp_cut=$(awk '/Edgecut/ {gsub(",",""); print $3}' gpmetis.out)
cut() { "$halo" info "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["edge_cut"])'; }
vol() { "$halo" info "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["comm_volume"])'; }
printf "%-22s %9s %10s %12s %12s\n" "K=$k" "wall s" "peak GiB" "edge cut" "comm volume"
printf "%-22s %9.1f %10.2f %12s %12s\n" "gpmetis (kway)" "$(wall gpmetis)" "$(rss gpmetis)" "$gp_cut" "-"
for m in "${methods[@]}"; do
  printf "%-22s %9.1f %10.2f %12s %12s\n" "halo partition $m" "$(wall $m)" "$(rss $m)" "$(cut parts-$m)" "$(vol parts-$m)"
done
python3 - "$(wall metis)" "$(wall gpmetis)" "$(rss metis)" "$(rss gpmetis)" <<'PY'
import sys
tw, gw, tr, gr = map(float, sys.argv[1:])
print(f"halo metis / gpmetis: time {tw/gw:.2f} (target <= 1.25), peak RSS {tr/gr:.2f} (target <= 1.25)")
PY
