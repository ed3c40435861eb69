#!/usr/bin/env bash
# A rank of a running 4-rank job fails from outside; the whole job must end, every process,
# within 15 s, with a non-zero exit, and a line that names the rank and what happened:
#   worker   SIGKILL of one rank's worker process ("killed by signal 9 ... from outside", from
#            its supervisor);
#   rank     SIGKILL of a whole rank, worker and supervisor, as a lost node would ("lost rank R",
#            from rank 0's supervisor: the connection closed without a goodbye);
#   freeze   SIGSTOP of a whole rank, as a hung node or a dead link would ("no heartbeat", from
#            rank 0's supervisor, with HALO_HEARTBEAT_TIMEOUT_S=3).
# Usage: kill_rank_test.sh HALO MPIEXEC [worker|rank|freeze]
set -uo pipefail
halo=$1
mpiexec=$2
mode=${3:-worker}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
t=$(mktemp -d /tmp/halo-kill-XXXXXX)
trap 'rm -rf "$t"' EXIT
"$halo" convert "$(dirname "$0")/../../../datasets/cora" -o "$t/cora" > /dev/null 2>&1 || exit 1
"$halo" partition "$t/cora" -k 4 -o "$t/parts" > /dev/null 2>&1 || exit 1
"$mpiexec" --oversubscribe --bind-to none -np 4 -x HALO_HEARTBEAT_TIMEOUT_S=3 "$halo" train "$t/parts" \
  --epochs 1000000 --eval-every 1000000 --threads 1 -q --log "$t/log.jsonl" > "$t/out" 2>&1 &
job=$!
for _ in $(seq 100); do  # wait until training runs (a few epochs logged)
  [ -f "$t/log.jsonl" ] && [ "$(wc -l < "$t/log.jsonl")" -ge 3 ] && break
  sleep 0.1
done
# Rank 2's worker: a `halo` process whose environment says rank 2; its parent is its supervisor.
worker=""
for p in $(pgrep -f -- "$t/log.jsonl"); do
  [ "$(cat /proc/$p/comm 2>/dev/null)" = halo ] || continue
  tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=2 && worker=$p
done
if [ -z "$worker" ]; then echo "FAIL: no rank 2 worker found"; kill -9 $job; exit 1; fi
supervisor=$(ps -o ppid= -p "$worker" | tr -d ' ')
case "$mode" in
  worker) victims=$worker; expect="error: rank 2 of 4 on [^ ]*: killed by signal 9 .* from outside" ;;
  rank) victims="$supervisor $worker"; expect="error: rank 0 of 4 on [^ ]*: lost rank 2 on [^ ]*: its connection closed without a goodbye" ;;
  freeze) victims="$supervisor $worker"; expect="error: rank 0 of 4 on [^ ]*: lost rank 2 on [^ ]*: no heartbeat for 3 s" ;;
  *) echo "FAIL: unknown mode $mode"; kill -9 $job; exit 1 ;;
esac
start=$(date +%s.%N)
if [ "$mode" = freeze ]; then kill -STOP $victims; else kill -9 $victims; fi
for _ in $(seq 150); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then echo "FAIL: mpirun still running 15 s after the $mode failure"; cat "$t/out"; kill -9 $job; exit 1; fi
wait $job
rc=$?
secs=$(echo "$(date +%s.%N) - $start" | bc)
# The job's processes still alive (zombies are gone in all but name). mpirun may return while a
# worker whose supervisor it killed is still tearing down, so wait for them up to the same 15 s
# from the failure, and name any that outlive it.
alive() {
  pgrep -f -- "$t/log.jsonl" | while read -r p; do
    s=$(awk '{print $3}' /proc/$p/stat 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ] && echo "$p"; done
}
left=$(alive | wc -l)
while [ "$left" -ne 0 ] && [ "$(echo "$(date +%s.%N) - $start < 15" | bc)" = 1 ]; do
  sleep 0.1
  left=$(alive | wc -l)
done
gone=$(echo "$(date +%s.%N) - $start" | bc)
echo "$mode failure of rank 2: job exited with $rc after $secs s; every process gone after $gone s; $left processes left"
[ "$left" -eq 0 ] || alive | while read -r p; do ps -o pid=,ppid=,stat=,etime=,args= -p "$p"; done
grep -E "^error" "$t/out"
[ "$rc" -ne 0 ] || { echo "FAIL: exit status 0"; exit 1; }
[ "$left" -eq 0 ] || { echo "FAIL: processes left"; exit 1; }
grep -qE "$expect" "$t/out" || { echo "FAIL: no line matching '$expect' in:"; cat "$t/out"; exit 1; }
echo PASS
