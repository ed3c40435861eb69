#!/usr/bin/env bash
# The one-call GPU check (run on the GPU machine through the device tool, from the repo root,
# with .gpu-bundle.tar.xz from tools/gpu-bundle.sh carried along):
#   1. the GPU tests: every Backend op CPU vs CUDA, 20-epoch trainings CPU vs CUDA (Cora, a
#      generated graph), 2 and 4 ranks sharing the GPU (MPI with host staging) vs 1 rank;
#   2. the GPU benchmark: SpMM effective bandwidth against a device-to-device copy, and a
#      3-layer GCN (hidden 256) epoch on a generated ogbn-products-sized graph against PyTorch
#      Geometric's GCNConv on the same graph and GPU.
# Logs and summary.txt go to $OUT (or /tmp/gpu-check). Budget: well under 10 minutes.
set -uo pipefail
repo=$(pwd)
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
b=/tmp/halo-bundle
rm -rf "$b" && mkdir -p "$b" && tar -C "$b" -xJf .gpu-bundle.tar.xz || { say "FAIL: no .gpu-bundle.tar.xz"; exit 1; }
cudalib=$(dirname "$(ldconfig -p | awk '/libcusparse.so.12 / {print $NF; exit}')" 2>/dev/null)
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -e $d/libcusparse.so.12 ]] && cudalib=$d && break
done
# NCCL is loaded at run time; the Python wheel's copy serves when the toolkit has none.
nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=${nccl:+$nccl:}$b/lib:$b/usr/lib/x86_64-linux-gnu/openmpi/lib:${cudalib:-/usr/local/cuda/lib64}:${LD_LIBRARY_PATH:-}
export OPAL_PREFIX=$b/usr PATH=$b/usr/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export HALO_SOURCE_DIR=$repo HALO_TEST_DATA_DIR=$repo/tests/data HALO_BINARY=$b/bin/halo HALO_MPIEXEC=$b/usr/bin/mpirun
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
"$b/bin/halo" version 2>&1 | tee -a "$summary"
status=0
if "$b/bin/halo" version | grep -q '^gpus: none'; then say "FAIL: halo sees no GPU (the GPU tests would only skip)"; status=1; fi

say "== GPU tests"
run_tests() {  # binary, filter
  timeout 240 "$b/bin/$1" --gtest_filter="$2" > "$out/$1.txt" 2>&1
  local rc=$?
  say "$1 $2: rc=$rc, $(grep -cE '^\[       OK \]' "$out/$1.txt") passed, $(grep -cE '^\[  FAILED  \] [A-Za-z]' "$out/$1.txt") failed, $(grep -cE '^\[  SKIPPED \] [A-Za-z]' "$out/$1.txt") skipped"
  [[ $rc -eq 0 ]] || status=1
}
run_tests gnn_tests 'Cuda*:Device*'
run_tests runtime_tests 'TrainerGpu*'
run_tests distributed_tests 'DistributedGpu*'

say "== GPU benchmark"
work=/tmp/halo-gpu-bench
mkdir -p "$work"
timeout 120 "$b/bin/halo" generate -o "$work/products" --nodes 2449029 --edges 61859140 --features 100 \
  --classes 47 --seed 1 > "$out/generate.txt" 2>&1 || say "generate failed"
timeout 60 "$b/bin/halo_bench_spmm" "$work/products" --device cuda > "$out/spmm.jsonl" 2>&1 || say "spmm bench failed"
cat "$out/spmm.jsonl" >> "$summary"
timeout 180 "$b/bin/halo" train "$work/products" --device cuda --layers 3 --hidden 256 --dropout 0.5 \
  --epochs 10 --eval-every 10 -q --log "$work/halo.jsonl" > "$out/halo-train.txt" 2>&1 || say "halo train failed"
tail -1 "$work/halo.jsonl" >> "$summary" 2>/dev/null
# The same with TF32 tensor-op GEMM (--matmul-precision tf32), for the record; 5 epochs.
timeout 120 "$b/bin/halo" train "$work/products" --device cuda --layers 3 --hidden 256 --dropout 0.5 \
  --epochs 5 --eval-every 5 -q --matmul-precision tf32 --log "$work/halo-tf32.jsonl" > "$out/halo-train-tf32.txt" 2>&1 ||
  say "halo train --matmul-precision tf32 failed"
tail -1 "$work/halo-tf32.jsonl" >> "$summary" 2>/dev/null
timeout 240 python3 tools/bench/pyg_gcn.py "$work/products" --epochs 10 > "$out/pyg.json" 2> "$out/pyg.err" || say "PyG run failed"
tail -1 "$out/pyg.json" >> "$summary"
python3 - "$work/halo.jsonl" "$out/pyg.json" <<'PY' 2>&1 | tee -a "$summary"
import json, sys
h = [json.loads(l) for l in open(sys.argv[1])][-1]
p = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
print(f"halo: {h['epoch_time_median_s']:.4f} s/epoch, peak GPU {h.get('peak_gpu_mb', 0):.0f} MiB")
print(f"PyG:  {p['epoch_time_median_s']:.4f} s/epoch, peak GPU {p['peak_gpu_mb']:.0f} MiB")
print(f"halo / PyG: time {h['epoch_time_median_s']/p['epoch_time_median_s']:.3f} (target <= 0.5), "
      f"memory {h.get('peak_gpu_mb', 0)/p['peak_gpu_mb']:.3f} (target <= 0.5)")
PY
say "gpu-check: $([[ $status -eq 0 ]] && echo tests passed || echo TESTS FAILED)"
exit $status
