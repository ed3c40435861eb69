#!/usr/bin/env bash
# Benchmark: distributed full-batch training on a generated ogbn-arxiv-sized graph (169,343
# nodes, 1,166,243 edges, 128 features, 40 classes), the ogbn-arxiv-gcn preset (3 x 256, batch
# norm). K = 2 and 4 ranks (1 thread each), METIS against random parts, against one process with
# 2 threads measured in the same run; then the communication savers (bf16 payload, staleness 1):
# their time on that graph, and their accuracy on a harder generated graph of the same size
# (homophily 0.5, feature noise 6: the exact run does not saturate) over 4 random parts, the
# most halo-heavy case, and 2 METIS parts; stale rows also smoothed (--halo-smoothing, GAMMA from
# $SMOOTHING, default 0.95). Prints two tables; logs stay in WORKDIR/dist. A run whose log already
# ends with a summary is not repeated (delete WORKDIR/dist to measure afresh).
#
#   tools/bench/distributed.sh [WORKDIR] [EPOCHS]
set -euo pipefail
bin=$(realpath "${BIN:-build/bin}")
work=${1:-/tmp/halo-bench}
epochs=${2:-50}
mkdir -p "$work/dist"
ds=$work/arxiv-native
[[ -d $ds ]] || "$bin/halo" generate -o "$ds" --nodes 169343 --edges 1166243 --features 128 --classes 40 --seed 1
hard=$work/arxiv-hard
[[ -d $hard ]] || "$bin/halo" generate -o "$hard" --nodes 169343 --edges 1166243 --features 128 --classes 40 \
  --seed 1 --homophily 0.5 --noise 6
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
for k in 2 4; do
  for m in metis random; do
    p=$work/dist/parts-$m-$k
    [[ -d $p ]] || "$bin/halo" partition "$ds" -k "$k" --method "$m" -o "$p" > "$p.out"
  done
done
[[ -d $work/dist/hard-random-4 ]] || "$bin/halo" partition "$hard" -k 4 --method random -o "$work/dist/hard-random-4" \
  > "$work/dist/hard-random-4.out"
[[ -d $work/dist/hard-metis-2 ]] || "$bin/halo" partition "$hard" -k 2 -o "$work/dist/hard-metis-2" \
  > "$work/dist/hard-metis-2.out"
common=(--preset ogbn-arxiv-gcn --epochs "$epochs" --eval-every 10 -q)
run() {  # name, then the command's words
  local name=$1
  shift
  if [[ -f $work/dist/$name.jsonl ]] && tail -1 "$work/dist/$name.jsonl" | grep -q '"summary"'; then return; fi
  /usr/bin/time -f "%e" -o "$work/dist/$name.time" "$@" --log "$work/dist/$name.jsonl" > "$work/dist/$name.out" 2>&1
}
run one-process "$bin/halo" train "$ds" "${common[@]}" --threads 2
for k in 2 4; do
  for m in metis random; do
    run "$m-$k" mpirun --oversubscribe --bind-to none -np "$k" "$bin/halo" train "$work/dist/parts-$m-$k" \
      "${common[@]}" --threads 1
  done
done
for m in metis random; do
  for saver in "bf16:--halo-dtype bf16" "stale:--halo-staleness 1" "bf16-stale:--halo-dtype bf16 --halo-staleness 1"; do
    # shellcheck disable=SC2086
    run "$m-2-${saver%%:*}" mpirun --oversubscribe --bind-to none -np 2 "$bin/halo" train "$work/dist/parts-$m-2" \
      "${common[@]}" --threads 1 ${saver#*:}
  done
done
run hard-one-process "$bin/halo" train "$hard" "${common[@]}" --threads 2
smooth=${SMOOTHING:-0.95}  # --halo-smoothing's GAMMA for the smoothed stale runs
for saver in "exact:" "bf16:--halo-dtype bf16" "stale:--halo-staleness 1" "bf16-stale:--halo-dtype bf16 --halo-staleness 1" \
  "stale-smooth:--halo-staleness 1 --halo-smoothing $smooth"; do
  # shellcheck disable=SC2086
  run "hard-random-4-${saver%%:*}" mpirun --oversubscribe --bind-to none -np 4 "$bin/halo" train \
    "$work/dist/hard-random-4" "${common[@]}" --threads 1 ${saver#*:}
done
for saver in "exact:" "stale:--halo-staleness 1" "stale-smooth:--halo-staleness 1 --halo-smoothing $smooth"; do
  # shellcheck disable=SC2086
  run "hard-metis-2-${saver%%:*}" mpirun --oversubscribe --bind-to none -np 2 "$bin/halo" train \
    "$work/dist/hard-metis-2" "${common[@]}" --threads 1 ${saver#*:}
done
/usr/bin/python3 - "$work/dist" <<'PY'
import json, os, sys
w = sys.argv[1]
def summary(name):
    return [json.loads(l) for l in open(f"{w}/{name}.jsonl")][-1]
base = summary("one-process")
names = ["one-process"] + [f"{m}-{k}" for k in (2, 4) for m in ("metis", "random")] + \
        [f"{m}-2-{s}" for m in ("metis", "random") for s in ("bf16", "stale", "bf16-stale")]
print(f"{'run':18}{'ranks':>6}{'halo MB/ep':>11}{'epoch s':>9}{'compute':>9}{'halo wait':>10}{'allreduce':>10}"
      f"{'vs 1 proc':>10}{'valid':>8}{'test':>8}")
for n in names:
    s = summary(n)
    r = s.get("ranks", 1)
    print(f"{n:18}{r:6}{s.get('halo_bytes_per_epoch', 0)/1e6:11.1f}{s['epoch_time_median_s']:9.3f}"
          f"{s.get('compute_s', s['epoch_time_median_s']):9.3f}{s.get('halo_wait_s', 0):10.3f}{s.get('allreduce_s', 0):10.3f}"
          f"{s['epoch_time_median_s']/base['epoch_time_median_s']:10.2f}{s['valid_mean']:8.4f}{s['test_mean']:8.4f}")
print()
print("accuracy of the savers on the harder graph (4 random parts; 2 METIS parts)")
print(f"{'run':28}{'halo MB/ep':>11}{'best valid':>11}{'test':>8}{'final loss':>11}")
for n in ["hard-one-process"] + [f"hard-random-4-{s}" for s in ("exact", "bf16", "stale", "bf16-stale", "stale-smooth")] + \
         [f"hard-metis-2-{s}" for s in ("exact", "stale", "stale-smooth")]:
    s = summary(n)
    loss = [json.loads(l) for l in open(f"{w}/{n}.jsonl")][-2]["loss"]
    print(f"{n:28}{s.get('halo_bytes_per_epoch', 0)/1e6:11.1f}{s['valid_mean']:11.4f}{s['test_mean']:8.4f}{loss:11.4f}")
PY
