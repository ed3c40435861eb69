#!/usr/bin/env bash
# Benchmark: halo's TGN against PyTorch Geometric's (tools/bench/tgn_pyg.py, the model of PyG's
# examples/tgn.py) on the bundled UCI messages, both trained on halo's split and scored on halo's
# evaluation negatives (`halo tgn split`), 2 threads each. EdgeBank is scored on both sides first:
# the same figures prove that the split and the negatives are the same. Then ROUNDS rounds of,
# interleaved: halo's defaults (neighbours before each event), halo --neighbors-before batch (PyG's
# rule) and PyG, each for EPOCHS epochs under /usr/bin/time -v. Prints the medians over the
# rounds: training events/s (median epoch), test AP, AUC and new-node AP (best validation epoch,
# per-batch means), peak RSS, and halo's events/s over PyG's.
#
# With STREAM_EVENTS > 0, the same three runs follow on the generated stream of 10 M events over
# 1 M nodes (tools/bench/tgn_stream.py, as tools/bench/tgn.sh): throughput only (--skip-eval),
# one epoch capped at its first STREAM_EVENTS training events, ROUNDS interleaved rounds.
#
#   tools/bench/tgn_peer.sh [WORKDIR] [ROUNDS] [EPOCHS] [STREAM_EVENTS]
# Needs a Python with torch and torch_geometric: PYTHON (default /tmp/dgl/bin/python); BIN: the
# halo build's bin directory (default build/bin).
set -euo pipefail
bin=$(realpath "${BIN:-build/bin}")
py=${PYTHON:-/tmp/dgl/bin/python}
work=${1:-/tmp/halo-bench}
rounds=${2:-3}
epochs=${3:-5}
stream_cap=${4:-0}
mkdir -p "$work"
uci=$work/uci
split=$work/uci-split.npz
results=$work/tgn-peer.jsonl
[[ -d $uci ]] || "$bin/halo" convert datasets/uci-messages/graph.txt --format konect -o "$uci" > /dev/null
rm -f "$split" "$results"
"$bin/halo" tgn split "$uci" -o "$split" > /dev/null

# EdgeBank on both sides: must agree.
rm -f "$work/edgebank-halo.jsonl"
"$bin/halo" tgn train "$uci" --model edgebank --log "$work/edgebank-halo.jsonl" > /dev/null
"$py" tools/bench/tgn_pyg.py "$split" --edgebank --json "$work/edgebank-pyg.json" > /dev/null
/usr/bin/python3 - "$work/edgebank-halo.jsonl" "$work/edgebank-pyg.json" <<'PY'
import json, sys
h, p = ([json.loads(l) for l in open(f)][-1] for f in sys.argv[1:])
keys = ("valid_ap", "test_ap", "test_auc", "test_inductive_ap", "test_inductive_auc")
for name, r in (("halo", h), ("tgn_pyg.py", p)):
    print(f"EdgeBank {name:11}" + "".join(f"  {k} {r[k]:.4f}" for k in keys))
bad = [k for k in keys if abs(h[k] - p[k]) > 1e-9]
if bad:
    sys.exit(f"EdgeBank differs ({', '.join(bad)}): the split or the negatives are not the same")
PY

# NAME LOG CMD...: runs CMD under /usr/bin/time -v and appends the last JSON line of LOG (the
# run's summary), its peak RSS and NAME to the results.
run() {
  local name=$1 log=$2
  shift 2
  rm -f "$log"
  /usr/bin/time -v -o "$work/peer-$name.time" "$@" > "$work/peer-$name.out"
  /usr/bin/python3 - "$name" "$log" "$work/peer-$name.time" >> "$results" <<'PY'
import json, sys
name, log, timing = sys.argv[1:]
s = [json.loads(l) for l in open(log)][-1]
kb = next(int(l.split()[-1]) for l in open(timing) if "Maximum resident set size" in l)
keys = ("events_per_s", "test_ap", "test_auc", "test_inductive_ap", "best_epoch", "import_rss_mb")
print(json.dumps({"run": name, "rss_mb": kb / 1024, **{k: s[k] for k in keys if k in s}}))
PY
  tail -n 1 "$results" >&2
}
for ((r = 1; r <= rounds; ++r)); do
  echo "round $r of $rounds" >&2
  for nb in event batch; do
    run "halo-$nb" "$work/peer-halo-$nb.jsonl" "$bin/halo" tgn train "$uci" --threads 2 \
      --epochs "$epochs" --neighbors-before "$nb" -q --log "$work/peer-halo-$nb.jsonl"
  done
  run pyg "$work/peer-pyg.json" "$py" tools/bench/tgn_pyg.py "$split" --threads 2 \
    --epochs "$epochs" --json "$work/peer-pyg.json"
done

/usr/bin/python3 - "$results" "$epochs" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda run, k: st.median(r[k] for r in rows if r["run"] == run)
names = {"halo-event": "halo, defaults (neighbours before each event)",
         "halo-batch": "halo, `--neighbors-before batch` (PyG's rule)",
         "pyg": "PyG TGN (examples/tgn.py model, tgn_pyg.py)"}
n = len([r for r in rows if r["run"] == "pyg"])
print(f"\nMedians of {n} rounds, {sys.argv[2]} epochs, 2 threads; test figures of the best "
      "validation epoch.\n")
print("| run | training events/s | test AP | test AUC | new-node AP | peak RSS MiB | events/s vs PyG |")
print("|---|---|---|---|---|---|---|")
pyg = med("pyg", "events_per_s")
for run, label in names.items():
    eps = med(run, "events_per_s")
    print(f"| {label} | {eps:,.0f} | {med(run, 'test_ap'):.4f} | {med(run, 'test_auc'):.4f} | "
          f"{med(run, 'test_inductive_ap'):.4f} | {med(run, 'rss_mb'):,.0f} | {eps / pyg:.2f}x |")
print(f"\nPyG's resident memory right after its imports (torch, torch_geometric): "
      f"{med('pyg', 'import_rss_mb'):,.0f} MiB.")
PY

((stream_cap > 0)) || exit 0
big=$work/stream-10m
bigsplit=$work/stream-10m-split.npz
if [[ ! -d $big ]]; then
  "$py" tools/bench/tgn_stream.py "$work/stream-10m.txt" --events 10000000 --nodes 1000000
  "$bin/halo" convert "$work/stream-10m.txt" --format konect -o "$big" > /dev/null
  rm -f "$work/stream-10m.txt"
fi
[[ -f $bigsplit ]] || "$bin/halo" tgn split "$big" -o "$bigsplit" > /dev/null
results=$work/tgn-peer-stream.jsonl
rm -f "$results"
for ((r = 1; r <= rounds; ++r)); do
  echo "10 M stream: round $r of $rounds" >&2
  for nb in event batch; do
    run "halo-$nb" "$work/peer-halo-$nb.jsonl" "$bin/halo" tgn train "$big" --threads 2 \
      --epochs 1 --max-train-events "$stream_cap" --skip-eval --neighbors-before "$nb" -q \
      --log "$work/peer-halo-$nb.jsonl"
  done
  run pyg "$work/peer-pyg.json" "$py" tools/bench/tgn_pyg.py "$bigsplit" --threads 2 \
    --epochs 1 --max-train-events "$stream_cap" --skip-eval --json "$work/peer-pyg.json"
done
/usr/bin/python3 - "$results" "$stream_cap" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda run, k: st.median(r[k] for r in rows if r["run"] == run)
n = len([r for r in rows if r["run"] == "pyg"])
print(f"\n10 M events / 1 M nodes: medians of {n} rounds, one epoch of the first {int(sys.argv[2]):,} "
      "training events, 2 threads, no evaluation.\n")
print("| run | training events/s | peak RSS MiB | events/s vs PyG |")
print("|---|---|---|---|")
pyg = med("pyg", "events_per_s")
for run, label in (("halo-event", "halo, defaults"), ("halo-batch", "halo, `--neighbors-before batch`"),
                   ("pyg", "PyG TGN (tgn_pyg.py)")):
    eps = med(run, "events_per_s")
    print(f"| {label} | {eps:,.0f} | {med(run, 'rss_mb'):,.0f} | {eps / pyg:.2f}x |")
print(f"\nPyG's resident memory right after its imports: {med('pyg', 'import_rss_mb'):,.0f} MiB.")
PY
