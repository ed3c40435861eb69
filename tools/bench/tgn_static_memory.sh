#!/usr/bin/env bash
# Benchmark (accuracy, not speed): DistTGL's static node memory (--static-memory D) against none,
# at batch sizes 200, 600 and 2,000, on 1 rank and on RANKS ranks with --parallel segments
# (DistTGL's setting: each rank trains on its own time segment with its own memory and the
# gradients are averaged, so the global batch is RANKS x the per-rank batch). --parallel exact
# is not run: it is the same model as 1 rank (losses within 1e-4; Distributed tests). Streams: UCI
# messages (bundled) and a generated stream of its size (tools/bench/tgn_stream.py: Zipf-active
# sources, half of the events repeating an earlier partner). Prints a markdown table; each run's
# JSON-lines log stays in WORKDIR.
#
#   tools/bench/tgn_static_memory.sh [WORKDIR]
#   env: EPOCHS (10), D (100), RANKS (4), BATCHES ("200 600 2000"), STREAMS ("uci synthetic"),
#        SEED (0; it draws the held-out new nodes, the initialisation and the training
#        negatives: a second seed shows how much of a difference is noise), THREADS (1 per rank),
#        BIN (build/bin)
# Needs, beyond `make`: Debian's python3-numpy (the stream generator) and mpirun.
set -euo pipefail
bin=$(realpath "${BIN:-build/bin}")
work=${1:-/tmp/halo-tgn-static}
epochs=${EPOCHS:-10}
dim=${D:-100}
ranks=${RANKS:-4}
threads=${THREADS:-1}
seed=${SEED:-0}
batches=${BATCHES:-200 600 2000}
streams=${STREAMS:-uci synthetic}
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[[ -d $work/uci ]] ||
  "$bin/halo" convert datasets/uci-messages/graph.txt --format konect -o "$work/uci" > /dev/null 2>&1
if [[ ! -d $work/synthetic ]]; then
  /usr/bin/python3 tools/bench/tgn_stream.py "$work/synthetic.txt" --events 60000 --nodes 3000
  "$bin/halo" convert "$work/synthetic.txt" --format konect -o "$work/synthetic" > /dev/null 2>&1
  rm -f "$work/synthetic.txt"
fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc); $epochs epochs (patience 5), D = $dim, seed $seed"
echo
echo "| stream | ranks | batch per rank (global) | static memory | valid AP | test AP | test AP, new nodes | best epoch / run | wall s |"
echo "|---|---|---|---|---|---|---|---|---|"
for stream in $streams; do
  for k in 1 "$ranks"; do
    for b in $batches; do
      for s in 0 "$dim"; do
        log=$work/$stream-r$k-b$b-s$s-seed$seed.jsonl
        args=(tgn train "$work/$stream" --batch-size "$b" --epochs "$epochs" --static-memory "$s"
          --seed "$seed" --threads "$threads" -q --log "$log")
        rm -f "$log"
        start=$(date +%s)
        if [[ $k == 1 ]]; then
          "$bin/halo" "${args[@]}" > /dev/null 2> "$log.err" || { cat "$log.err" >&2; exit 1; }
        else
          mpirun --oversubscribe --bind-to none -np "$k" "$bin/halo" "${args[@]}" \
            --parallel segments > /dev/null 2> "$log.err" || { cat "$log.err" >&2; exit 1; }
        fi
        wall=$(($(date +%s) - start))
        /usr/bin/python3 - "$log" "$stream" "$k" "$b" "$s" "$wall" <<'PY'
import json, sys
log, stream, k, b, s, wall = sys.argv[1:]
recs = [json.loads(l) for l in open(log)]
ran = sum(r["type"] == "epoch" for r in recs)
m = [r for r in recs if r["type"] == "summary"][-1]
print(f"| {stream} | {k} | {b} ({int(b) * int(k)}) | {'D = ' + s if s != '0' else 'off'} | "
      f"{m['valid_ap']:.4f} | {m['test_ap']:.4f} | {m['test_inductive_ap']:.4f} | "
      f"{m['best_epoch']} / {ran} | {wall} |")
PY
      done
    done
  done
done
