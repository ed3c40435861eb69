#!/usr/bin/env bash
# Benchmark: full-batch 3-layer GCN (hidden 256, batch norm, dropout 0.5: the ogbn-arxiv-gcn
# preset) on a generated ogbn-arxiv-sized graph, 2 threads, halo against the same model in plain
# PyTorch (Debian's python3-torch, torch.sparse.mm on the normalised adjacency, Adam) in the same
# run; plus halo's SpMM effective bandwidth against a STREAM triad measured in the same run.
# Both trainings read the graph renumbered by `halo reorder` (METIS parts of 4096 nodes numbered
# contiguously: the generator's ids are random, which no real dataset's are); the SpMM figures
# are given for both node orders. halo trains twice: FP32 GEMM (the default, PyTorch's
# arithmetic) and --gemm-precision bf16 when the CPU has AVX-512 BF16 (mixed precision, as
# torch.set_float32_matmul_precision("medium") allows).
#
#   tools/bench/train.sh [WORKDIR] [EPOCHS]
# Needs, beyond `make`: apt-get install python3-torch libopenblas0-pthread
set -euo pipefail
bin=$(realpath "${BIN:-build/bin}")
work=${1:-/tmp/halo-bench}
epochs=${2:-10}
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
"$bin/halo" train "$dsm" --preset ogbn-arxiv-gcn --epochs "$epochs" --eval-every "$epochs" \
  --threads "$threads" --log "$work/halo-train.jsonl" -q > "$work/halo-train.out"
rm -f "$work/halo-train-bf16.jsonl"
"$bin/halo" train "$dsm" --preset ogbn-arxiv-gcn --epochs "$epochs" --eval-every "$epochs" \
  --threads "$threads" --gemm-precision bf16 --log "$work/halo-train-bf16.jsonl" -q > "$work/halo-train-bf16.out" 2>&1 ||
  echo "(no bf16 run: $(tail -1 "$work/halo-train-bf16.out"))"
/usr/bin/python3 tools/bench/train_torch.py "$dsm" --epochs "$epochs" --threads "$threads" > "$work/torch-train.json"
OMP_NUM_THREADS=$threads "$bin/halo_bench_stream" > "$work/stream.json"
OMP_NUM_THREADS=$threads "$bin/halo_bench_spmm" "$dsm" > "$work/spmm.jsonl"
OMP_NUM_THREADS=$threads "$bin/halo_bench_spmm" "$ds" > "$work/spmm-random-ids.jsonl"
/usr/bin/python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
def halo_run(path):  # the summary, with the last epoch's loss added
    recs = [json.loads(l) for l in open(path)]
    s = recs[-1]
    s["final_loss"] = [r for r in recs if r["type"] == "epoch"][-1]["loss"]
    return s
halo = halo_run(f"{w}/halo-train.jsonl")
torch = json.loads(open(f"{w}/torch-train.json").read().strip().splitlines()[-1])
triad = json.loads(open(f"{w}/stream.json").read())["triad_gb_per_s"]
spmm = [json.loads(l) for l in open(f"{w}/spmm.jsonl")]
spmm_random = [json.loads(l) for l in open(f"{w}/spmm-random-ids.jsonl")]
runs = [("halo, fp32 GEMM", halo)]
try:
    runs.append(("halo, bf16 GEMM", halo_run(f"{w}/halo-train-bf16.jsonl")))
except (OSError, IndexError):
    pass
tt, tr = torch["epoch_time_median_s"], torch["peak_rss_mb"]
print(f"{'':24}{'median epoch s':>16}{'peak RSS MiB':>14}{'final loss':>12}")
for name, h in runs:
    print(f"{name:24}{h['epoch_time_median_s']:16.3f}{h['peak_rss_mb']:14.0f}{h['final_loss']:12.4f}")
print(f"{'PyTorch ' + torch['torch_version']:24}{tt:16.3f}{tr:14.0f}{torch['final_loss']:12.4f}")
for name, h in runs:
    print(f"{name} / PyTorch: epoch time {h['epoch_time_median_s']/tt:.3f} (target <= 0.167), "
          f"peak RSS {h['peak_rss_mb']/tr:.3f} (target <= 0.5)")
print(f"STREAM triad: {triad:.1f} GB/s")
for s, r in zip(spmm, spmm_random):
    print(f"SpMM width {s['width']:4}: {s['seconds']*1e3:7.1f} ms, {s['gb_per_s']:5.1f} GB/s = {s['gb_per_s']/triad:.2f} of triad (target >= 0.5)"
          f"; generator's random ids: {r['gb_per_s']:5.1f} GB/s = {r['gb_per_s']/triad:.2f}")
PY
