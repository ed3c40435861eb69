#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets of tests/fuzz with clang (every library instrumented
# for coverage, AddressSanitizer and UndefinedBehaviorSanitizer) in build-fuzz/, seeds each
# target's corpus from the bundled data, and runs each for SECONDS. A finding (crash, sanitizer
# report, an exception other than halo's own errors, an input slower than 10 s, more than 2 GiB)
# is saved under build-fuzz/findings/ and fails the run. Prints one summary line per target
# (also in build-fuzz/fuzz-summary.txt); the corpora grow across runs.
#
#   tools/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
build=${FUZZ_BUILD:-build-fuzz}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_metis fuzz_edgelist fuzz_temporal fuzz_ogb fuzz_npz fuzz_native fuzz_assignment)
command -v clang++ > /dev/null || { echo "fuzz: needs clang (tools/install-deps.sh --fuzz)" >&2; exit 1; }
mkdir -p "$build"
[ -f "$build/CMakeCache.txt" ] || CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHALO_FUZZ=ON -DHALO_CUDA=OFF -DHALO_TESTS=OFF > "$build/configure.log"
cmake --build "$build" -j "${JOBS:-2}" --target fuzz_targets > "$build/build.log" || { tail -30 "$build/build.log"; exit 1; }

# Seeds: small valid inputs of every format, prefixed with the selector bytes each target reads.
# (gzip -dc | head: gzip may die of SIGPIPE when head has enough, which pipefail would make fatal.)
seed() {  # target, name, then the bytes on stdin
  mkdir -p "$build/corpus/$1"
  cat > "$build/corpus/$1/seed-$2"
}
printf '4 5\n2 3\n1 3 4\n1 2 4\n2 3\n' | seed fuzz_metis small
printf '%% weighted\n3 3 011 1\n5 2 1 3 2\n7 1 1 3 3\n9 1 2 2 3\n' | seed fuzz_metis weights
head -c 20000 /dev/null | seed fuzz_metis empty
{ printf '\0'; printf '0 1\n1 2\n2 0\n# comment\n3,4\n'; } | seed fuzz_edgelist zero-based
{ printf '\1'; printf '1 2 0.5\n2 3 1.5\n%% c\n'; } | seed fuzz_edgelist one-based
{ printf '\0'; head -n 50 datasets/uci-messages/graph.txt; } | seed fuzz_temporal konect
{ printf '\1'; printf '0 1 10\n1 2 11\n2 0 12\n'; } | seed fuzz_temporal snap
{ printf '\2'; printf 'user_id,item_id,timestamp,state_label,f1,f2\n0,0,1.0,0,0.1,0.2\n1,0,2.0,1,0.3,0.4\n'; } | seed fuzz_temporal jodie
{ printf '\0\50\100'; { gzip -dc datasets/cora/raw/edge.csv.gz || true; } | head -n 40; } | seed fuzz_ogb edges
{ printf '\5\50\100'; { gzip -dc datasets/cora/raw/node-label.csv.gz || true; } | head -n 50; } | seed fuzz_ogb labels-gz
{ printf '\2\50\0'; printf '1\n2\n3\n5\n8\n'; } | seed fuzz_ogb index
{ printf '\3\0\0'; printf '2708\n'; } | seed fuzz_ogb count
{ printf '\10\50\100'; head -c 400 datasets/cora/raw/edge.csv.gz; } | seed fuzz_ogb raw-gz
for f in tests/data/npz/*.npz; do seed fuzz_npz "$(basename "$f")" < "$f"; done
{ printf '\0\3\10'; printf '0\n1\n2\n3\n3\n2\n1\n0\n'; } | seed fuzz_assignment part-text
{ printf '\1\1\4'; printf '\223NUMPY\1\0\166\0'; printf "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }%*s\n" 60 ''; printf '\0\0\0\0\1\0\0\0\0\0\0\0\1\0\0\0'; } | seed fuzz_assignment npy-i4
# fuzz_native mode 3 (issue 35): a meta.json field nested 200,000 deep (refused), 60 deep (parsed).
printf '\6\3\120\303\125\0' | seed fuzz_native nest-deep
printf '\7\1\17\0\252\0' | seed fuzz_native nest-shallow
for i in 0 1 2 3 4 5 6 7 8 9 10 11; do printf "\\$(printf %o $((i % 8)))\\$(printf %o "$i")\1\0\377\40\0\7" | seed fuzz_native "file-$i"; done

mkdir -p "$build/findings"
status=0
: > "$build/fuzz-summary.txt"
for t in "${targets[@]}"; do
  log=$build/findings/$t.log
  set +e
  "$build/fuzz/$t" "$build/corpus/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$build/findings/$t-" -print_final_stats=1 > "$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  line="$t: ${execs:-?} executions in ${seconds} s, ${cov:-cov: ?}, corpus $(ls "$build/corpus/$t" | wc -l) inputs"
  if [ $rc -ne 0 ]; then
    line+=", FINDING (exit $rc): $(grep -m1 -E 'ERROR|SUMMARY|deadly|uncaught|timeout|out-of-memory' "$log" || echo see "$log")"
    status=1
  else
    line+=", no findings"
  fi
  echo "$line" | tee -a "$build/fuzz-summary.txt"
done
exit $status
