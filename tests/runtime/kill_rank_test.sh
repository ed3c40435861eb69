#!/usr/bin/env bash
# Acceptance: SIGKILL one rank of a running 4-rank job from outside; the job must end, every
# process, within 15 s and with a non-zero exit. Usage: kill_rank_test.sh HALO MPIEXEC
set -uo pipefail
halo=$1
mpiexec=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
t=$(mktemp -d /tmp/halo-kill-XXXXXX)
trap 'rm -rf "$t"' EXIT
"$halo" convert "$(dirname "$0")/../../datasets/cora" -o "$t/cora" > /dev/null 2>&1 || exit 1
"$halo" partition "$t/cora" -k 4 -o "$t/parts" > /dev/null 2>&1 || exit 1
"$mpiexec" --oversubscribe --bind-to none -np 4 "$halo" train "$t/parts" --epochs 1000000 --eval-every 1000000 \
  --threads 1 -q --log "$t/log.jsonl" > "$t/out" 2>&1 &
job=$!
for _ in $(seq 100); do  # wait until training runs (a few epochs logged)
  [ -f "$t/log.jsonl" ] && [ "$(wc -l < "$t/log.jsonl")" -ge 3 ] && break
  sleep 0.1
done
victim=$(pgrep -f -- "$t/log.jsonl" | while read -r p; do
  [ "$(cat /proc/$p/comm 2>/dev/null)" = halo ] && echo "$p"; done | sed -n 2p)
if [ -z "$victim" ]; then echo "FAIL: no rank found to kill"; kill -9 $job; exit 1; fi
start=$(date +%s.%N)
kill -9 "$victim"
for _ in $(seq 150); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then echo "FAIL: mpirun still running 15 s after SIGKILL"; kill -9 $job; exit 1; fi
wait $job
rc=$?
secs=$(echo "$(date +%s.%N) - $start" | bc)
left=$(pgrep -f -- "$t/log.jsonl" | while read -r p; do
  s=$(awk '{print $3}' /proc/$p/stat 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ] && echo "$p"; done | wc -l)
echo "killed rank pid $victim: job exited with $rc after $secs s; $left processes left"
[ "$rc" -ne 0 ] || { echo "FAIL: exit status 0"; exit 1; }
[ "$left" -eq 0 ] || { echo "FAIL: processes left"; exit 1; }
echo PASS
