#!/usr/bin/env bash
# The one-call GPU check (run on the GPU machine through the device tool, from the repo root,
# with .gpu-bundle.tar.xz from tools/gpu-bundle.sh carried along). The headline first, so a run
# cut short still returns it:
#   1. the GPU benchmark: a 3-layer GCN (hidden 256) epoch on a generated ogbn-products-sized
#      graph against PyTorch Geometric's GCNConv on the same graph and GPU (time and memory),
#      then SpMM effective bandwidth against a device-to-device copy for each kernel (strict:
#      a cuSPARSE decline is an error, and each row says which kernel ran);
#   2. the GPU tests, capped: every Backend op CPU vs CUDA, 20-epoch trainings CPU vs CUDA, NCCL
#      on one rank and NCCL init with a missing peer (it must end at the deadline), 2 and 4
#      ranks sharing the GPU vs 1 rank, the communication savers on GPU ranks vs CPU ranks,
#      `halo predict` on the GPU vs the CPU, TGN's ops, batches and trainings (CUDA vs CPU, a CUDA
#      checkpoint resumed, ranks sharing the GPU); skipped tests are listed by name, and a skipped
#      NCCL test fails the check (on this machine it must run);
#   3. TGN on UCI (once `halo tgn train` takes --device, #36): CUDA against the CPU path, the
#      node state in host memory (--memory-on host) against on the GPU, and against PyG's TGN
#      on the same GPU;
#   4. with time left, the training with TF32 GEMMs, for the record.
#
#   OUT=$OUT bash tools/gpu-check.sh      (device tool: carry .gpu-bundle.tar.xz, timeout_s 480)
#
# What comes back: $OUT/summary.txt (the figures, every step's outcome, the failed steps by
# name) and $OUT/logs.tar.gz (every step's full output and halo's JSON logs), re-packed after
# each step. Each step has its own time limit, clipped to an overall budget
# (GPU_CHECK_BUDGET_S, default 420 s: with the tool's start-up this leaves room for a second run
# in 15 minutes of device time); the limits below add up to the budget (10 + 15, benchmark
# 60 + 55 + 75 + 35, tests 35 + 40 + 15 + 40 + 20, TF32 30) but for the TGN section's (10 + 25 +
# 35 + 20 + 10 + 40): steps that finish early leave it their time, and TF32, last, is what a run
# that uses every limit skips. A failed step does not stop
# the others. Halo's binaries get the bundle's libraries (LD_LIBRARY_PATH); Python does
# not, so PyTorch loads its own CUDA libraries. tools/gpu-check-rehearse.sh runs all of this on
# a machine without a GPU, made to look like the GPU machine.
set -uo pipefail
repo=$(pwd)
out=${OUT:-/tmp/gpu-check}
logs=/tmp/gpu-check-logs
mkdir -p "$out"
rm -rf "$logs" && mkdir -p "$logs"
summary=$out/summary.txt
: > "$summary"
deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-420}))
status=0
failed_steps=()
say() { echo "$*" | tee -a "$summary"; }
# fail NAME WHY: a failed step, said now and listed again at the end.
fail() {
  failed_steps+=("$1")
  status=1
  say "FAIL $1: $2 (logs: $1.txt)"
}
pack() { cp "$summary" "$logs/" 2>/dev/null; tar -C "$logs" -czf "$out/logs.tar.gz" . 2>/dev/null; }
trap pack EXIT

b=/tmp/halo-bundle
rm -rf "$b" && mkdir -p "$b"
if [[ ! -f $repo/.gpu-bundle.tar.xz ]]; then
  say "FAIL unpack: no .gpu-bundle.tar.xz (run tools/gpu-bundle.sh, carry it)"
  exit 1
fi
# tar needs xz for .tar.xz; a bare machine may lack it, Python's tarfile does not.
if xz --version > /dev/null 2>&1; then
  tar -C "$b" -xJf "$repo/.gpu-bundle.tar.xz"
else
  say "note: no xz here; unpacking with Python's tarfile"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$repo/.gpu-bundle.tar.xz" "$b"
fi || { say "FAIL unpack: the bundle does not unpack"; exit 1; }
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
  fail ldd "halo lacks libraries: $(grep 'not found' "$logs/ldd.txt" | awk '{print $1}' | tr '\n' ' ')"
fi
step version 10 "$b/bin/halo" version
cat "$logs/version.txt" >> "$summary"
gpu=1
if grep -q '^gpus: none' "$logs/version.txt"; then
  gpu=0
  fail version "halo sees no GPU (the GPU tests would only skip)"
fi
step mpi-smoke 15 "$b/usr/bin/mpirun" --oversubscribe -np 2 "$b/bin/halo" version ||
  fail mpi-smoke "mpirun does not start 2 ranks"

say "== GPU benchmark (products-sized graph)"
work=/tmp/halo-gpu-bench
mkdir -p "$work"
graph=$work/products
if [[ ! -f $graph/meta.json ]]; then
  step generate 60 "$b/bin/halo" generate -o "$graph" --nodes 2449029 --edges 61859140 --features 100 \
    --classes 47 --seed 1 || fail generate "halo generate failed"
fi
train_args=(--device cuda --layers 3 --hidden 256 --dropout 0.5 -q)
step halo-train 55 "$b/bin/halo" train "$graph" "${train_args[@]}" --epochs 6 --eval-every 6 \
  --log "$logs/halo.jsonl" || fail halo-train "halo train failed"
STEP_LD=$py_ld step pyg 75 python3 "$repo/tools/bench/pyg_gcn.py" "$graph" --epochs 6 ||
  fail pyg "the PyG run failed"
grep -h "declined" "$logs"/halo-train.txt 2>/dev/null | sort | uniq -c | head -5 | tee -a "$summary"  # kernels cuSPARSE refused
python3 - "$logs/halo.jsonl" "$logs/pyg.txt" <<'PY' 2>&1 | tee -a "$summary"
import json, sys

def records(path):
    try:
        return [json.loads(l) for l in open(path) if l.startswith("{")]
    except (OSError, ValueError):
        return []

hs, ps = records(sys.argv[1]), records(sys.argv[2])
h, p = (hs[-1] if hs else None), (ps[-1] if ps else None)
losses = [r["loss"] for r in hs if r.get("type") == "epoch"]
if h and h.get("type") == "summary":
    print(f"halo: {h['epoch_time_median_s']:.4f} s/epoch, peak GPU {h.get('peak_gpu_mb', 0):.0f} MiB, "
          f"loss {losses[0] if losses else float('nan'):.4f} -> {losses[-1] if losses else float('nan'):.4f}, "
          f"valid {h.get('valid_mean', float('nan')):.4f}")
else:
    print("halo: no summary (see halo-train.txt)")
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
step spmm-bench 35 "$b/bin/halo_bench_spmm" "$graph" --device cuda --repeats 3 ||
  fail spmm-bench "halo_bench_spmm failed (a cuSPARSE decline is an error there)"
grep '^{' "$logs/spmm-bench.txt" >> "$summary" 2>/dev/null

say "== GPU tests"
export HALO_CUDA_SYNC=1  # a fault is reported by the op that caused it
# tests NAME BINARY FILTER LIMIT: one gtest binary's GPU tests, counted from gtest's own totals;
# skipped tests are named, and a skipped NCCL test on a machine with a GPU is a failure.
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
  grep -E '^\[  SKIPPED \] [A-Za-z][A-Za-z0-9_]*\.[A-Za-z0-9_/]+$' "$f" | sort -u | sed 's/^\[  SKIPPED \]/  skipped:/' | tee -a "$summary"
  ((rc == 0)) || fail "$name" "$bin $filter"
  if ((gpu)) && grep -qE '^\[  SKIPPED \] [A-Za-z]*Nccl' "$f"; then
    fail "$name" "an NCCL test was skipped on a machine with a GPU (is libnccl.so.2 found? see ldd.txt)"
  fi
}
tests gnn-tests gnn_tests 'Cuda*:Device*' 35
tests runtime-tests runtime_tests 'TrainerGpu*:NcclGpu*:TgnGpu*:-NcclGpu.InitWithAMissingPeer*' 40
HALO_COMM_TIMEOUT_S=3 tests nccl-deadline runtime_tests 'NcclGpu.InitWithAMissingPeer*' 15
tests distributed-tests distributed_tests 'DistributedGpu*' 40
tests predict-tests predict_tests 'PredictGpu*' 20
unset HALO_CUDA_SYNC

say "== TGN on the GPU (UCI)"
# halo tgn train on CUDA against the CPU path (3 epochs: losses within 1e-3 relative, test AP
# within 0.005) and against PyG's TGN on the same GPU and split (events/s, peak GPU memory, AP).
# Only once halo tgn train takes --device (#36); before that the section says so and costs
# nothing.
uci=$work/uci
if ! env LD_LIBRARY_PATH="$halo_ld" "$b/bin/halo" tgn train --help 2>/dev/null | grep -q -- '--device'; then
  say "SKIP tgn: this halo tgn train has no --device (#36: the model is not yet on the GPU)"
else
  [[ -f $uci/meta.json ]] ||
    step uci-convert 10 "$b/bin/halo" convert "$repo/datasets/uci-messages/graph.txt" --format konect -o "$uci" ||
    fail uci-convert "halo convert of UCI failed"
  step tgn-cuda 25 "$b/bin/halo" tgn train "$uci" --device cuda --epochs 3 -q --log "$logs/tgn-cuda.jsonl" ||
    fail tgn-cuda "halo tgn train --device cuda failed"
  step tgn-cpu 35 "$b/bin/halo" tgn train "$uci" --device cpu --epochs 3 -q --log "$logs/tgn-cpu.jsonl" ||
    fail tgn-cpu "halo tgn train on the CPU failed"
  step tgn-host 20 "$b/bin/halo" tgn train "$uci" --device cuda --memory-on host --epochs 3 -q \
    --log "$logs/tgn-host.jsonl" || fail tgn-host "halo tgn train --device cuda --memory-on host failed"
  step tgn-split 10 "$b/bin/halo" tgn split "$uci" -o "$work/uci-split.npz" || fail tgn-split "halo tgn split failed"
  STEP_LD=$py_ld step tgn-pyg 40 python3 "$repo/tools/bench/tgn_pyg.py" "$work/uci-split.npz" --device cuda \
    --epochs 3 --json "$logs/tgn-pyg.json" || fail tgn-pyg "the PyG TGN run failed"
  python3 - "$logs/tgn-cuda.jsonl" "$logs/tgn-cpu.jsonl" "$logs/tgn-pyg.json" "$logs/tgn-host.jsonl" <<'PY' 2>&1 | tee -a "$summary"
import json, sys

def records(path):
    try:
        return [json.loads(l) for l in open(path) if l.startswith("{")]
    except (OSError, ValueError):
        return []

gpu, cpu, pyg, host = (records(p) for p in sys.argv[1:5])
gl = [r["loss"] for r in gpu if r.get("type") == "epoch"]
cl = [r["loss"] for r in cpu if r.get("type") == "epoch"]
gs = next((r for r in gpu if r.get("type") == "summary"), None)
cs = next((r for r in cpu if r.get("type") == "summary"), None)
if gs and cs and len(gl) == len(cl) > 0:
    worst = max(abs(a - b) / abs(b) for a, b in zip(gl, cl))
    dap = abs(gs["test_ap"] - cs["test_ap"])
    ok = worst <= 1e-3 and dap <= 0.005
    print(f"tgn cuda vs cpu: losses within {worst:.2e} relative (<= 1e-3), test AP {gs['test_ap']:.4f} "
          f"vs {cs['test_ap']:.4f} (<= 0.005): {'ok' if ok else 'FAIL'}")
    print(f"halo tgn cuda: {gs['events_per_s']:.0f} events/s, peak GPU {gs.get('peak_gpu_mb', 0):.0f} MiB; "
          f"cpu (16 cores): {cs['events_per_s']:.0f} events/s")
else:
    print("tgn cuda vs cpu: FAIL (missing logs; see tgn-cuda.txt, tgn-cpu.txt)")
hl = [r["loss"] for r in host if r.get("type") == "epoch"]
hs = next((r for r in host if r.get("type") == "summary"), None)
if gs and hs and len(hl) == len(gl) > 0:
    worst = max(abs(a - b) / abs(b) for a, b in zip(hl, gl))
    ok = worst <= 1e-5 and hs.get("memory_on") == "host"
    print(f"tgn --memory-on host vs device: losses within {worst:.2e} relative (<= 1e-5), "
          f"{hs['events_per_s']:.0f} vs {gs['events_per_s']:.0f} events/s "
          f"({hs['events_per_s'] / gs['events_per_s']:.2f}, target >= 0.7), peak GPU "
          f"{hs.get('peak_gpu_mb', 0):.0f} vs {gs.get('peak_gpu_mb', 0):.0f} MiB: {'ok' if ok else 'FAIL'}")
else:
    print("tgn --memory-on host vs device: FAIL (missing logs; see tgn-host.txt)")
p = pyg[-1] if pyg else None
if p and gs:
    print(f"PyG TGN (cuda): {p['events_per_s']:.0f} events/s, peak GPU {p.get('peak_gpu_mb', 0):.0f} MiB, "
          f"test AP {p.get('test_ap', float('nan')):.4f}; halo / PyG events/s "
          f"{gs['events_per_s'] / p['events_per_s']:.2f} (target >= 4)")
else:
    print("PyG TGN (cuda): no result (see tgn-pyg.txt)")
PY
  grep -q "tgn cuda vs cpu: FAIL" "$summary" && fail tgn-compare "CUDA and CPU TGN differ (see above)"
  grep -q "tgn --memory-on host vs device: FAIL" "$summary" &&
    fail tgn-host-compare "TGN with its memory on the host differs from on the device (see above)"
fi

say "== for the record"
# The same training with TF32 tensor-op GEMMs, with what time is left.
step halo-train-tf32 30 "$b/bin/halo" train "$graph" "${train_args[@]}" --epochs 4 --eval-every 4 \
  --matmul-precision tf32 --log "$logs/halo-tf32.jsonl" && python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
print("halo tf32: %.4f s/epoch" % s["epoch_time_median_s"])' "$logs/halo-tf32.jsonl" 2>&1 | tee -a "$summary"

if ((status == 0)); then
  say "gpu-check: passed, $SECONDS s"
else
  say "gpu-check: FAILED steps: ${failed_steps[*]}; $SECONDS s"
fi
exit $status
