#!/usr/bin/env bash
# Benchmark: TGN training throughput (training events per second, median epoch, no evaluation)
# for 1 rank with 2 threads and 2 ranks with 1 thread each (exact, and --parallel segments), on the bundled UCI messages and on a
# generated stream of 10 M events over 1 M nodes (memory of every node on the host; only the
# batch's rows are touched). On the 10 M stream an epoch is capped at --max-train-events (the
# per-event cost does not depend on how many events follow), so a run takes a minute, not hours.
#
#   tools/bench/tgn.sh [WORKDIR] [TRAIN_EVENTS_ON_10M]
# Needs, beyond `make`: apt-get install python3-numpy (the stream generator)
set -euo pipefail
bin=$(realpath "${BIN:-build/bin}")
work=${1:-/tmp/halo-bench}
cap=${2:-200000}
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --oversubscribe --bind-to none)
uci=$work/uci
[[ -d $uci ]] || "$bin/halo" convert datasets/uci-messages/graph.txt --format konect -o "$uci" > /dev/null
big=$work/stream-10m
if [[ ! -d $big ]] && ! /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  echo "the 10 M-event stream generator needs Debian's python3-numpy: apt-get install python3-numpy" >&2
  exit 2
fi
if [[ ! -d $big ]]; then
  /usr/bin/python3 tools/bench/tgn_stream.py "$work/stream-10m.txt" --events 10000000 --nodes 1000000
  "$bin/halo" convert "$work/stream-10m.txt" --format konect -o "$big"
  rm -f "$work/stream-10m.txt"
fi
run() {  # NAME RANKS THREADS DATASET ARGS...
  local name=$1 ranks=$2 threads=$3 ds=$4
  shift 4
  local log=$work/tgn-$name.jsonl
  if [[ $ranks == 1 ]]; then
    "$bin/halo" tgn train "$ds" --threads "$threads" --skip-eval -q --log "$log" "$@" > /dev/null
  else
    "${mpirun[@]}" -np "$ranks" -x OMP_NUM_THREADS="$threads" \
      "$bin/halo" tgn train "$ds" --skip-eval -q --log "$log" "$@" > /dev/null
  fi
  /usr/bin/python3 - "$log" "$name" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
print(f"{sys.argv[2]:28}{s['events_per_s']:>12,.0f}{s['peak_rss_mb']:>14,.0f}")
PY
}
printf '%-28s%12s%14s\n' run "events/s" "peak MiB"
run uci-1rank-2threads 1 2 "$uci" --epochs 3
run uci-2ranks-1thread 2 1 "$uci" --epochs 3
run uci-2ranks-segments 2 1 "$uci" --epochs 3 --parallel segments
run 10m-1rank-2threads 1 2 "$big" --epochs 1 --max-train-events "$cap"
run 10m-2ranks-1thread 2 1 "$big" --epochs 1 --max-train-events "$cap"
run 10m-2ranks-segments 2 1 "$big" --epochs 1 --max-train-events "$cap" --parallel segments
