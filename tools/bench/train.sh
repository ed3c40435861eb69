#!/usr/bin/env bash
# Benchmark: full-batch 3-layer GCN (hidden 256, batch norm, dropout 0.5: the ogbn-arxiv-gcn
# preset) on a generated ogbn-arxiv-sized graph, 2 threads, halo against the same model in plain
# PyTorch (Debian's python3-torch, torch.sparse.mm on the normalised adjacency, Adam) in the same
# run; plus halo's SpMM effective bandwidth against a STREAM triad measured in the same run.
# Both trainings read the graph renumbered by `halo reorder` (METIS parts of 4096 nodes numbered
# contiguously: the generator's ids are random, which no real dataset's are); the SpMM figures
# are given for both node orders. halo trains twice: FP32 (the default, PyTorch's
# arithmetic) and --matmul-precision bf16 when the CPU has AVX-512 BF16 (mixed precision, as
# torch.set_float32_matmul_precision("medium") allows).
#
#   tools/bench/train.sh [WORKDIR] [EPOCHS] [ROUNDS]
# Needs, beyond `make`: apt-get install python3-torch libopenblas0-pthread
set -euo pipefail
bin=$(realpath "${BIN:-build/bin}")
work=${1:-/tmp/halo-bench}
epochs=${2:-10}
rounds=${3:-3}
threads=2
mkdir -p "$work"
ds=$work/arxiv-native
if [[ ! -d $ds ]]; then
  "$bin/halo" generate -o "$ds" --nodes 169343 --edges 1166243 --features 128 --classes 40 --seed 1
fi
dsm=$work/arxiv-metis
if [[ ! -d $dsm ]]; then
  "$bin/halo" reorder "$ds" -o "$dsm" --method metis --block 4096
fi
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "PyTorch baseline needs Debian's python3-torch: apt-get install python3-torch libopenblas0-pthread" >&2
  exit 2
fi
# Rounds: halo fp32, halo bf16, PyTorch, repeated. This VM's speed drifts by 20-30% over minutes
# (neighbours on the host), so each round's ratios compare runs minutes apart at most, and the
# figure is the median round.
bf16=1
for ((r = 1; r <= rounds; ++r)); do
  "$bin/halo" train "$dsm" --preset ogbn-arxiv-gcn --epochs "$epochs" --eval-every "$epochs" \
    --threads "$threads" --log "$work/halo-train.$r.jsonl" -q > "$work/halo-train.out" 2>&1
  rm -f "$work/halo-train-bf16.$r.jsonl"
  if ((bf16)) && ! "$bin/halo" train "$dsm" --preset ogbn-arxiv-gcn --epochs "$epochs" --eval-every "$epochs" \
      --threads "$threads" --matmul-precision bf16 --log "$work/halo-train-bf16.$r.jsonl" -q > "$work/halo-train-bf16.out" 2>&1; then
    echo "(no bf16 runs: $(tail -1 "$work/halo-train-bf16.out"))"
    bf16=0
  fi
  /usr/bin/python3 tools/bench/train_torch.py "$dsm" --epochs "$epochs" --threads "$threads" > "$work/torch-train.$r.json" 2> "$work/torch-train.err"
done
OMP_NUM_THREADS=$threads "$bin/halo_bench_stream" > "$work/stream.json"
OMP_NUM_THREADS=$threads "$bin/halo_bench_spmm" "$dsm" > "$work/spmm.jsonl"
OMP_NUM_THREADS=$threads "$bin/halo_bench_spmm" "$ds" > "$work/spmm-random-ids.jsonl"
/usr/bin/python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
w, rounds = sys.argv[1], int(sys.argv[2])
def halo_run(path):  # the summary, with the last epoch's loss added
    recs = [json.loads(l) for l in open(path)]
    s = recs[-1]
    s["final_loss"] = [r for r in recs if r["type"] == "epoch"][-1]["loss"]
    return s
def optional(path):
    try:
        return halo_run(path)
    except (OSError, IndexError):
        return None
rows = []
for r in range(1, rounds + 1):
    torch = json.loads(open(f"{w}/torch-train.{r}.json").read().strip().splitlines()[-1])
    rows.append((halo_run(f"{w}/halo-train.{r}.jsonl"), optional(f"{w}/halo-train-bf16.{r}.jsonl"), torch))
print(f"{'round':>5}{'halo fp32 s':>13}{'halo bf16 s':>13}{'PyTorch s':>11}{'fp32/PyTorch':>14}{'bf16/PyTorch':>14}")
for i, (h, b, t) in enumerate(rows, 1):
    tt = t["epoch_time_median_s"]
    print(f"{i:5}{h['epoch_time_median_s']:13.3f}{(b['epoch_time_median_s'] if b else float('nan')):13.3f}{tt:11.3f}"
          f"{h['epoch_time_median_s'] / tt:14.3f}{(b['epoch_time_median_s'] / tt if b else float('nan')):14.3f}")
med = lambda xs: statistics.median(xs)
t_rss = med([t["peak_rss_mb"] for _, _, t in rows])
print(f"PyTorch {rows[0][2]['torch_version']}: final loss {rows[-1][2]['final_loss']:.4f}, peak RSS {t_rss:.0f} MiB")
for name, k in (("halo, fp32", 0), ("halo, bf16 matmul", 1)):
    if any(r[k] is None for r in rows):
        continue
    ratio = med([r[k]["epoch_time_median_s"] / r[2]["epoch_time_median_s"] for r in rows])
    rss = med([r[k]["peak_rss_mb"] for r in rows])
    print(f"{name}: final loss {rows[-1][k]['final_loss']:.4f}, peak RSS {rss:.0f} MiB; median round: "
          f"epoch time {ratio:.3f} of PyTorch's (target <= 0.167), peak RSS {rss / t_rss:.3f} (target <= 0.5)")
triad = json.loads(open(f"{w}/stream.json").read())["triad_gb_per_s"]
spmm = [json.loads(l) for l in open(f"{w}/spmm.jsonl")]
spmm_random = [json.loads(l) for l in open(f"{w}/spmm-random-ids.jsonl")]
print(f"STREAM triad: {triad:.1f} GB/s")
for s, r in zip(spmm, spmm_random):
    print(f"SpMM width {s['width']:4}: {s['seconds']*1e3:7.1f} ms, {s['gb_per_s']:5.1f} GB/s = {s['gb_per_s']/triad:.2f} of triad (target >= 0.5)"
          f"; generator's random ids: {r['gb_per_s']:5.1f} GB/s = {r['gb_per_s']/triad:.2f}")
PY
