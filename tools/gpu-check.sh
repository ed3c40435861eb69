#!/usr/bin/env bash
# The one-call GPU check (run on the GPU machine through the device tool, from the repo root,
# with .gpu-bundle.tar.xz from tools/gpu-bundle.sh carried along):
#   1. the GPU tests: every Backend op CPU vs CUDA, 20-epoch trainings CPU vs CUDA (Cora, a
#      generated graph), NCCL on one rank, 2 and 4 ranks sharing the GPU (MPI with host
#      staging) vs 1 rank, the communication savers on GPU ranks vs CPU ranks, and `halo
#      predict` on the GPU (1 process, 2 ranks) vs the CPU;
#   2. the GPU benchmark: a 3-layer GCN (hidden 256) epoch on a generated ogbn-products-sized
#      graph against PyTorch Geometric's GCNConv on the same graph and GPU, SpMM effective
#      bandwidth against a device-to-device copy, and the same training with TF32 GEMMs.
#
#   OUT=$OUT bash tools/gpu-check.sh      (device tool: carry .gpu-bundle.tar.xz, timeout_s 500)
#
# What comes back: $OUT/summary.txt (the figures and every step's outcome) and
# $OUT/logs.tar.gz (every step's full output and halo's JSON logs), re-packed after each step
# so a run cut short still returns what it did. Each step has its own time limit, clipped to an
# overall budget (GPU_CHECK_BUDGET_S, default 450 s); a failed step does not stop the others.
# Halo's binaries get the bundle's libraries (LD_LIBRARY_PATH); Python does not, so PyTorch
# loads its own CUDA libraries.
set -uo pipefail
repo=$(pwd)
out=${OUT:-/tmp/gpu-check}
logs=/tmp/gpu-check-logs
mkdir -p "$out"
rm -rf "$logs" && mkdir -p "$logs"
summary=$out/summary.txt
: > "$summary"
deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-450}))
status=0
say() { echo "$*" | tee -a "$summary"; }
pack() { cp "$summary" "$logs/" 2>/dev/null; tar -C "$logs" -czf "$out/logs.tar.gz" . 2>/dev/null; }
trap pack EXIT

b=/tmp/halo-bundle
rm -rf "$b" && mkdir -p "$b"
tar -C "$b" -xJf "$repo/.gpu-bundle.tar.xz" || { say "FAIL: no .gpu-bundle.tar.xz (run tools/gpu-bundle.sh, carry it)"; exit 1; }
here=$(bash "$repo/tools/source-hash.sh" 2>/dev/null)
if [[ $here != "$(cat "$b/SOURCE" 2>/dev/null)" ]]; then
  say "WARNING: the bundle was built from other sources ($(cat "$b/SOURCE" 2>/dev/null) vs $here here)"
fi

# The CUDA 13 libraries halo links, from the toolkit or PyTorch's wheels; NCCL (loaded at run
# time) from either.
py_nvidia=$(python3 -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null)
candidates=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib)
[[ -n $py_nvidia ]] && candidates+=("$py_nvidia"/cu13/lib "$py_nvidia"/*/lib)
while read -r l; do candidates+=("$(dirname "$l")"); done < <(ldconfig -p 2>/dev/null | awk '/libcusparse.so.12 |libnccl.so.2 / {print $NF}')
cuda_dirs=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcusparse.so.12 libnvJitLink.so.13 libnccl.so.2; do
  found=""
  for d in "${candidates[@]}"; do
    if [[ -e $d/$lib ]]; then found=$d; break; fi
  done
  if [[ -z $found ]]; then say "missing: $lib (not in the toolkit or PyTorch's wheels)"; continue; fi
  [[ ":$cuda_dirs:" == *":$found:"* ]] || cuda_dirs=${cuda_dirs:+$cuda_dirs:}$found
done
halo_ld=$b/lib:$b/usr/lib/x86_64-linux-gnu/openmpi/lib:$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
py_ld=${LD_LIBRARY_PATH:-}

# Open MPI relocated into the bundle. OPAL_PREFIX does not move sysconfdir, so Debian's MCA
# settings (/etc/openmpi) are given here; PMIx's plugins are found through their own variable.
export OPAL_PREFIX=$b/usr PATH=$b/usr/bin:$PATH
export PMIX_MCA_mca_base_component_path=$b/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx,pt2pt
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_btl_base_warn_component_unused=0
export HALO_SOURCE_DIR=$repo HALO_TEST_DATA_DIR=$repo/tests/data HALO_BINARY=$b/bin/halo HALO_MPIEXEC=$b/usr/bin/mpirun
export HALO_COMM_TIMEOUT_S=60  # a hung rank fails inside its step, with a named error

# step NAME LIMIT_S COMMAND...: runs COMMAND with halo's libraries (STEP_LD overrides), output
# in $logs/NAME.txt, time-limited (clipped to the budget); prints nothing, returns its status.
step() {
  local name=$1 lim=$2
  shift 2
  local left=$((deadline - SECONDS - 15))
  ((left < lim)) && lim=$left
  if ((lim < 10)); then
    say "SKIP $name: out of time"
    return 124
  fi
  local t0=$SECONDS
  env LD_LIBRARY_PATH="${STEP_LD-$halo_ld}" timeout -k 10 "$lim" "$@" > "$logs/$name.txt" 2>&1
  local rc=$?
  ((rc == 124 || rc == 137)) && say "TIMEOUT $name after $lim s"
  echo "$name: rc=$rc, $((SECONDS - t0)) s" >> "$logs/steps.txt"
  pack
  return $rc
}

nvidia-smi > "$logs/nvidia-smi.txt" 2>&1
env LD_LIBRARY_PATH="$halo_ld" ldd "$b/bin/halo" > "$logs/ldd.txt" 2>&1
if grep -q "not found" "$logs/ldd.txt"; then
  say "FAIL: halo lacks libraries: $(grep 'not found' "$logs/ldd.txt" | awk '{print $1}' | tr '\n' ' ')"
  status=1
fi
step version 30 "$b/bin/halo" version
cat "$logs/version.txt" >> "$summary"
if grep -q '^gpus: none' "$logs/version.txt"; then say "FAIL: halo sees no GPU (the GPU tests would only skip)"; status=1; fi
step mpi-smoke 30 "$b/usr/bin/mpirun" --oversubscribe -np 2 "$b/bin/halo" version ||
  { say "FAIL: mpirun does not start 2 ranks (logs: mpi-smoke.txt)"; status=1; }

say "== GPU tests"
export HALO_CUDA_SYNC=1  # a kernel fault is reported by the op that caused it
# tests NAME BINARY FILTER: one gtest binary's GPU tests, counted from gtest's own totals.
tests() {
  local name=$1 bin=$2 filter=$3 lim=$4
  step "$name" "$lim" "$b/bin/$bin" --gtest_filter="$filter"
  local rc=$? f=$logs/$name.txt
  local passed failed skipped
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$f" | grep -oE '[0-9]+$')
  failed=$(grep -oE '^\[  FAILED  \] [0-9]+ tests?, listed below' "$f" | grep -oE '^\[  FAILED  \] [0-9]+' | grep -oE '[0-9]+$')
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ tests?, listed below' "$f" | grep -oE '^\[  SKIPPED \] [0-9]+' | grep -oE '[0-9]+$')
  say "$bin $filter: rc=$rc, ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
  grep -E '^\[  FAILED  \] [A-Za-z].*\([0-9]+ ms\)$' "$f" | sed 's/^/  /' | tee -a "$summary"
  ((rc == 0)) || status=1
}
tests gnn-tests gnn_tests 'Cuda*:Device*' 90
tests runtime-tests runtime_tests 'TrainerGpu*:NcclGpu*' 120
tests distributed-tests distributed_tests 'DistributedGpu*' 200
tests predict-tests predict_tests 'PredictGpu*' 90

say "== GPU benchmark"
unset HALO_CUDA_SYNC
work=/tmp/halo-gpu-bench
mkdir -p "$work"
graph=$work/products
if [[ ! -f $graph/meta.json ]]; then
  step generate 120 "$b/bin/halo" generate -o "$graph" --nodes 2449029 --edges 61859140 --features 100 \
    --classes 47 --seed 1 || say "generate failed (logs: generate.txt)"
fi
train_args=(--device cuda --layers 3 --hidden 256 --dropout 0.5 -q)
step halo-train 150 "$b/bin/halo" train "$graph" "${train_args[@]}" --epochs 10 --eval-every 10 \
  --log "$logs/halo.jsonl" || say "halo train failed (logs: halo-train.txt)"
STEP_LD=$py_ld step pyg 180 python3 "$repo/tools/bench/pyg_gcn.py" "$graph" --epochs 10 ||
  say "PyG run failed (logs: pyg.txt)"
step spmm-bench 90 "$b/bin/halo_bench_spmm" "$graph" --device cuda || say "spmm bench failed (logs: spmm-bench.txt)"
grep '^{' "$logs/spmm-bench.txt" >> "$summary" 2>/dev/null
# The same training with TF32 tensor-op GEMMs, for the record.
step halo-train-tf32 100 "$b/bin/halo" train "$graph" "${train_args[@]}" --epochs 5 --eval-every 5 \
  --matmul-precision tf32 --log "$logs/halo-tf32.jsonl" || say "halo train --matmul-precision tf32 failed"

grep -h "declined" "$logs"/*.txt 2>/dev/null | sort | uniq -c | head -5 | tee -a "$summary"  # kernels cuSPARSE refused
python3 - "$logs/halo.jsonl" "$logs/pyg.txt" "$logs/halo-tf32.jsonl" <<'PY' 2>&1 | tee -a "$summary"
import json, sys

def last_json(path):
    try:
        lines = [l for l in open(path) if l.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except OSError:
        return None

h, p, t = last_json(sys.argv[1]), last_json(sys.argv[2]), last_json(sys.argv[3])
if h and h.get("type") == "summary":
    print(f"halo: {h['epoch_time_median_s']:.4f} s/epoch, peak GPU {h.get('peak_gpu_mb', 0):.0f} MiB, "
          f"final loss {h.get('final_loss', float('nan'))}")
else:
    print("halo: no summary (see halo-train.txt)")
if t and t.get("type") == "summary":
    print(f"halo tf32: {t['epoch_time_median_s']:.4f} s/epoch")
if not p:
    print("PyG: no result (see pyg.txt)")
elif p.get("oom"):
    print(f"PyG ({p.get('adj')}): out of GPU memory after {p['epochs_done']} epochs, peak {p['peak_gpu_mb']:.0f} MiB")
elif p.get("error"):
    print(f"PyG: failed: {p['error']}")
else:
    print(f"PyG ({p.get('adj')}, torch {p.get('torch')}, pyg {p.get('pyg')}): {p['epoch_time_median_s']:.4f} s/epoch, "
          f"peak GPU {p['peak_gpu_mb']:.0f} MiB (reserved {p.get('peak_gpu_reserved_mb', 0):.0f})")
    if h and h.get("type") == "summary":
        print(f"halo / PyG: time {h['epoch_time_median_s'] / p['epoch_time_median_s']:.3f} (target <= 0.5), "
              f"memory {h.get('peak_gpu_mb', 0) / p['peak_gpu_mb']:.3f} (target <= 0.5)")
PY
say "gpu-check: $([[ $status -eq 0 ]] && echo tests passed || echo TESTS FAILED), $SECONDS s"
exit $status
