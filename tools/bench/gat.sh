#!/usr/bin/env bash
# Benchmark: full-batch GAT on a generated ogbn-arxiv-sized graph, 2 threads: halo's
# `--preset ogbn-arxiv-gat` (3 layers of 3 heads x 250, residual, output heads averaged) against
# the same model in DGL 2.1's GATConv (tools/bench/dgl_gat.py) in the same run, interleaved
# rounds, medians. Both read the graph renumbered by `halo reorder` (METIS blocks of 4096, as
# tools/bench/train.sh). Prints per round and the median: epoch seconds, peak RSS, final loss,
# and halo / DGL ratios.
#
#   tools/bench/gat.sh [WORKDIR] [EPOCHS] [ROUNDS]
# Needs a DGL venv (PyPI only): python3 -m venv /tmp/dglvenv && /tmp/dglvenv/bin/pip install
#   torch==2.2.1 "numpy<2" dgl==2.1.0 pandas pyyaml pydantic && /tmp/dglvenv/bin/pip install
#   --no-deps torchdata==0.7.1      (DGL_PYTHON overrides the interpreter)
set -euo pipefail
bin=$(realpath "${BIN:-build/bin}")
py=${DGL_PYTHON:-/tmp/dglvenv/bin/python}
work=${1:-/tmp/halo-bench}
epochs=${2:-5}
rounds=${3:-3}
threads=2
mkdir -p "$work"
if ! "$py" -c "import dgl" 2> /dev/null; then
  echo "gat.sh: $py cannot import dgl (see the install line at the top of this script)" >&2
  exit 2
fi
ds=$work/arxiv-native
[[ -d $ds ]] || "$bin/halo" generate -o "$ds" --nodes 169343 --edges 1166243 --features 128 \
  --classes 40 --seed 1
dsm=$work/arxiv-metis
[[ -d $dsm ]] || "$bin/halo" reorder "$ds" -o "$dsm" --method metis --block 4096
for ((r = 1; r <= rounds; ++r)); do
  "$bin/halo" train "$dsm" --preset ogbn-arxiv-gat --epochs "$epochs" --eval-every "$epochs" \
    --threads "$threads" --log "$work/halo-gat.$r.jsonl" -q > "$work/halo-gat.out" 2>&1
  "$py" tools/bench/dgl_gat.py "$dsm" --epochs "$epochs" --threads "$threads" \
    > "$work/dgl-gat.$r.json" 2> "$work/dgl-gat.err"
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
w, rounds = sys.argv[1], int(sys.argv[2])
rows = []
for r in range(1, rounds + 1):
    recs = [json.loads(l) for l in open(f"{w}/halo-gat.{r}.jsonl")]
    h = recs[-1]
    h_loss = [x for x in recs if x["type"] == "epoch"][-1]["loss"]
    d = json.loads(open(f"{w}/dgl-gat.{r}.json").read())
    rows.append((h["epoch_time_median_s"], h["peak_rss_mb"], h_loss,
                 d["epoch_time_median_s"], d["peak_rss_mb"], d["final_loss"]))
print(f"{'round':>5} {'halo s':>8} {'halo MB':>8} {'loss':>7} {'DGL s':>8} {'DGL MB':>8} "
      f"{'loss':>7} {'time x':>7} {'mem x':>6}")
for i, (ht, hm, hl, dt, dm, dl) in enumerate(rows, 1):
    print(f"{i:>5} {ht:8.3f} {hm:8.0f} {hl:7.4f} {dt:8.3f} {dm:8.0f} {dl:7.4f} {ht/dt:7.3f} "
          f"{hm/dm:6.3f}")
med = lambda k: statistics.median(row[k] for row in rows)
print(f"median: halo {med(0):.3f} s/epoch, {med(1):.0f} MB; DGL {med(3):.3f} s/epoch, "
      f"{med(4):.0f} MB; halo/DGL time {statistics.median(r[0]/r[3] for r in rows):.3f}, "
      f"memory {statistics.median(r[1]/r[4] for r in rows):.3f}")
PY
