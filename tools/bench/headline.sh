#!/usr/bin/env bash
# Benchmark: halo's headline comparisons against the PyPI peers, interleaved on this machine, one
# table. 2 threads per run, ROUNDS rounds; each round runs every contender once, in this order:
#   gcn  generated ogbn-arxiv-sized graph (METIS-renumbered, as tools/bench/train.sh and gat.sh):
#        halo --preset ogbn-arxiv-gcn FP32, the same with --matmul-precision bf16 (when the CPU
#        has AVX-512 BF16), DGL GraphConv and PyG GCNConv (tools/bench/peer_gcn.py);
#   gat  the same graph: halo --preset ogbn-arxiv-gat, DGL GATConv (tools/bench/dgl_gat.py);
#   tgn  the bundled UCI messages on halo's split: halo tgn train defaults, PyG's TGN
#        (tools/bench/tgn_pyg.py), as tools/bench/tgn_peer.sh.
# Prints each run's record to stderr as it ends and, at the end, one Markdown table on stdout:
# the CPU (model, vendor, CPUs, AVX-512 BF16 / AMX flags), date, halo's commit, the peers'
# versions, then per contender the median epoch seconds (events/s for TGN), peak RSS, final loss
# (test AP for TGN), the ratios and the targets of #38 (GCN >= 4.5x DGL in FP32, bf16 >= 1.0x
# FP32, GAT <= 0.4x DGL's epoch, TGN >= 2x PyG's events/s with AP unchanged). The table is also
# written to WORKDIR/headline.md, every run's record to WORKDIR/headline.jsonl.
# Run it on an otherwise idle machine: other jobs on the cores skew every figure, TGN's most (its
# OpenMP threads spin between short regions: docs/BENCHMARKS.md). With EPOCHS >= 3 the median
# epoch leaves out the first, which includes each side's one-off setup (PyG's normalisation).
#
#   tools/bench/headline.sh WORKDIR [ROUNDS] [EPOCHS]        (defaults 3 rounds, 5 epochs)
#   HEADLINE_ONLY=gcn,tgn tools/bench/headline.sh /tmp/hb 1 3  (a subset of gcn, gat, tgn)
# BIN: halo's bin directory (default build/bin). PYTHON: the peers' interpreter (default
# /tmp/dglvenv/bin/python). A peer it cannot import gives a "not installed" row, so the script
# also runs with halo alone. The peers, PyPI only:
#   python3 -m venv /tmp/dglvenv && /tmp/dglvenv/bin/pip install torch==2.2.1 "numpy<2"
#     dgl==2.1.0 pandas pyyaml pydantic torch-geometric &&
#     /tmp/dglvenv/bin/pip install --no-deps torchdata==0.7.1
set -euo pipefail
install_line='python3 -m venv /tmp/dglvenv && /tmp/dglvenv/bin/pip install torch==2.2.1 "numpy<2" dgl==2.1.0 pandas pyyaml pydantic torch-geometric && /tmp/dglvenv/bin/pip install --no-deps torchdata==0.7.1'
if (($# < 1 || $# > 3)); then
  echo "usage: tools/bench/headline.sh WORKDIR [ROUNDS] [EPOCHS]" >&2
  exit 2
fi
work=$1
rounds=${2:-3}
epochs=${3:-5}
only=${HEADLINE_ONLY:-gcn,gat,tgn}
threads=2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${BIN:-build/bin}
py=${PYTHON:-/tmp/dglvenv/bin/python}
halo=$bin/halo
if [[ ! -x $halo ]]; then
  echo "headline.sh: no halo executable at $halo (build it: cmake --build build --target halo; or set BIN)" >&2
  exit 2
fi
halo=$(realpath "$halo")
if [[ ! $rounds =~ ^[1-9][0-9]*$ || ! $epochs =~ ^[1-9][0-9]*$ ]]; then
  echo "headline.sh: ROUNDS and EPOCHS must be positive integers (got '$rounds', '$epochs')" >&2
  exit 2
fi
want_gcn=0 want_gat=0 want_tgn=0
IFS=, read -ra parts <<< "$only"
for p in "${parts[@]}"; do
  case $p in
    gcn) want_gcn=1 ;;
    gat) want_gat=1 ;;
    tgn) want_tgn=1 ;;
    *)
      echo "headline.sh: HEADLINE_ONLY: unknown benchmark '$p' (expected a comma list of gcn, gat, tgn)" >&2
      exit 2
      ;;
  esac
done
mkdir -p "$work"
work=$(realpath "$work")
jsonl=$work/headline.jsonl
logs=$work/headline-logs
mkdir -p "$logs"
rm -f "$jsonl"
helper=("python3" "$here/headline.py")

# imports MODULE: whether the peers' interpreter can import it.
imports() { DGLBACKEND=pytorch "$py" -c "import $1" > /dev/null 2>&1; }
have_dgl=0 have_pyg=0 have_bf16=0
imports dgl && have_dgl=1
imports torch_geometric && have_pyg=1
grep -qw avx512_bf16 /proc/cpuinfo 2> /dev/null && have_bf16=1
"${helper[@]}" env "$jsonl" --python "$py" --threads "$threads" --rounds "$rounds" \
  --epochs "$epochs" --bin "$halo"
missing="not installed: $install_line (PYTHON=$py)"

# Datasets, made once per WORKDIR (the same names as train.sh and gat.sh use, so reused).
if ((want_gcn || want_gat)); then
  ds=$work/arxiv-native
  [[ -d $ds ]] || "$halo" generate -o "$ds" --nodes 169343 --edges 1166243 --features 128 \
    --classes 40 --seed 1 > /dev/null
  dsm=$work/arxiv-metis
  [[ -d $dsm ]] || "$halo" reorder "$ds" -o "$dsm" --method metis --block 4096 > /dev/null
fi
if ((want_tgn)); then
  uci=$work/uci
  split=$work/uci-split.npz
  [[ -d $uci ]] || "$halo" convert "$repo/datasets/uci-messages/graph.txt" --format konect \
    -o "$uci" > /dev/null
  [[ -f $split ]] || "$halo" tgn split "$uci" -o "$split" > /dev/null
fi

skip() { "${helper[@]}" skip "$jsonl" --bench "$1" --run "$2" --reason "$3"; }
((want_gcn && !have_bf16)) && skip gcn halo-bf16 "n/a: this CPU has no avx512_bf16 (/proc/cpuinfo), which --matmul-precision bf16 needs"
((want_gcn && !have_dgl)) && skip gcn dgl "$missing"
((want_gcn && !have_pyg)) && skip gcn pyg "$missing"
((want_gat && !have_dgl)) && skip gat dgl "$missing"
((want_tgn && !have_pyg)) && skip tgn pyg "$missing"

# run ROUND BENCH NAME KIND:FILE CMD...: one contender's run, recorded in headline.jsonl.
run() {
  local round=$1 bench=$2 name=$3 parse=$4
  shift 4
  "${helper[@]}" run "$jsonl" --round "$round" --bench "$bench" --run "$name" --parse "$parse" \
    --out "$logs/$bench-$name.$round" -- "$@"
}
for ((r = 1; r <= rounds; ++r)); do
  echo "round $r of $rounds" >&2
  if ((want_gcn)); then
    log=$logs/gcn-halo-fp32.$r.jsonl
    rm -f "$log"
    run "$r" gcn halo-fp32 "halo-train:$log" "$halo" train "$dsm" --preset ogbn-arxiv-gcn \
      --epochs "$epochs" --eval-every "$epochs" --threads "$threads" --log "$log" -q
    if ((have_bf16)); then
      log=$logs/gcn-halo-bf16.$r.jsonl
      rm -f "$log"
      run "$r" gcn halo-bf16 "halo-train:$log" "$halo" train "$dsm" --preset ogbn-arxiv-gcn \
        --epochs "$epochs" --eval-every "$epochs" --threads "$threads" --matmul-precision bf16 \
        --log "$log" -q
    fi
    for fw in dgl pyg; do
      have=$have_dgl
      [[ $fw == pyg ]] && have=$have_pyg
      ((have)) || continue
      run "$r" gcn "$fw" "peer-json:$logs/gcn-$fw.$r.out" "$py" "$here/peer_gcn.py" "$dsm" \
        --framework "$fw" --epochs "$epochs" --threads "$threads"
    done
  fi
  if ((want_gat)); then
    log=$logs/gat-halo.$r.jsonl
    rm -f "$log"
    run "$r" gat halo "halo-train:$log" "$halo" train "$dsm" --preset ogbn-arxiv-gat \
      --epochs "$epochs" --eval-every "$epochs" --threads "$threads" --log "$log" -q
    if ((have_dgl)); then
      run "$r" gat dgl "peer-json:$logs/gat-dgl.$r.out" "$py" "$here/dgl_gat.py" "$dsm" \
        --epochs "$epochs" --threads "$threads"
    fi
  fi
  if ((want_tgn)); then
    log=$logs/tgn-halo.$r.jsonl
    rm -f "$log"
    run "$r" tgn halo "halo-tgn:$log" "$halo" tgn train "$uci" --threads "$threads" \
      --epochs "$epochs" -q --log "$log"
    if ((have_pyg)); then
      out=$logs/tgn-pyg.$r.json
      rm -f "$out"
      run "$r" tgn pyg "json:$out" "$py" "$here/tgn_pyg.py" "$split" --threads "$threads" \
        --epochs "$epochs" --json "$out"
    fi
  fi
done
"${helper[@]}" table "$jsonl" --md "$work/headline.md"
