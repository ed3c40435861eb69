#!/usr/bin/env bash
# `make sanitize`: builds halo and its single-process tests with AddressSanitizer (leaks
# included) and UndefinedBehaviorSanitizer (gcc, every report fatal) in build-asan/, and runs
# them. Left out, by name: the multi-rank suites (distributed_tests, cluster_tests, kill_rank_*,
# the PT-Scotch runs under mpirun:
# Open MPI's own allocations would drown the reports, and they run unsanitized in `make test`),
# the memory-model checks that compare measured resident memory (ASan's shadow memory changes
# it) and plot_log (Python). Leak reports of third-party libraries are suppressed by name in
# tests/lsan.supp, never halo's own.
#
#   tools/sanitize.sh [ctest -R regex]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SANITIZE_BUILD:-build-asan}
mkdir -p "$build"
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHALO_SANITIZE=address,undefined -DHALO_CUDA=OFF -DHALO_WERROR=ON > "$build/configure.log"
cmake --build "$build" -j "${JOBS:-2}" --target halo halo-rank-supervisor graph_tests partition_tests gnn_tests \
  runtime_tests tool_tests memory_model_tests > "$build/build.log" || { tail -40 "$build/build.log"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
cd "$build"
ctest --output-on-failure -j "${JOBS:-2}" ${1:+-R "$1"} \
  -E '^(Distributed|DistributedGpu|Cluster|HaloExchange\.SelfPlan.*Gpu|kill_rank_.*|plot_log|Ranks/PtScotch|PtScotchRun)|_NOT_BUILT$|MeasuredPeak|Measured'
