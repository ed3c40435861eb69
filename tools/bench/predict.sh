#!/usr/bin/env bash
# `halo predict` against `halo train` on the ogbn-products-sized graph, in one run: peak RSS and
# time of a short training (with --checkpoint), then of inference from its checkpoint, without
# and with embeddings; prints the ratio of the peaks (target <= 0.5) and checks that the
# predictions are the bytes the training wrote.
#   tools/bench/predict.sh WORK [EPOCHS]      (default 2 epochs)
# WORK must hold products-metis: tools/bench/convert.sh WORK products, then
#   build/bin/halo reorder WORK/products-native -o WORK/products-metis
set -euo pipefail
work=${1:?usage: tools/bench/predict.sh WORK [EPOCHS]}
epochs=${2:-2}
halo=${HALO:-build/bin/halo}
data=$work/products-metis
if [[ ! -f $data/meta.json ]]; then
  echo "predict.sh: no $data (tools/bench/convert.sh $work products; $halo reorder $work/products-native -o $data)" >&2
  exit 1
fi
rm -rf "$work/predict-ck" "$work"/predict-*.npy
timed() {  # timed NAME COMMAND...: runs it, keeping "peak_kib wall_s" in $work/NAME.time
  local name=$1
  shift
  /usr/bin/time -f "%M %e" -o "$work/$name.time" "$@"
}
timed train "$halo" train "$data" --preset ogbn-products-gcn --epochs "$epochs" --eval-every 1 \
  --threads 2 --checkpoint "$work/predict-ck" --predictions-out "$work/predict-train.npy" -q
timed predict "$halo" predict "$data" --checkpoint "$work/predict-ck" \
  -o "$work/predict-pred.npy" --threads 2 | tee "$work/predict.out"
timed embed "$halo" predict "$data" --checkpoint "$work/predict-ck" \
  -o "$work/predict-pred2.npy" --embeddings-out "$work/predict-emb.npy" --threads 2 |
  tee "$work/embed.out"
cmp "$work/predict-train.npy" "$work/predict-pred.npy"
cmp "$work/predict-pred.npy" "$work/predict-pred2.npy"
read -r t_kib t_s < "$work/train.time"
read -r p_kib p_s < "$work/predict.time"
read -r e_kib e_s < "$work/embed.time"
p_inf=$(grep -oE 'inference [0-9.]+ s' "$work/predict.out" | grep -oE '[0-9.]+')
e_inf=$(grep -oE 'inference [0-9.]+ s' "$work/embed.out" | grep -oE '[0-9.]+')
gib() { echo "scale=2; $1 / 1048576" | bc; }
echo
echo "train ($epochs epochs, checkpointed)   peak RSS $(gib "$t_kib") GiB, wall $t_s s"
echo "predict                            peak RSS $(gib "$p_kib") GiB, wall $p_s s, inference $p_inf s"
echo "predict --embeddings-out (layer 1) peak RSS $(gib "$e_kib") GiB, wall $e_s s, inference $e_inf s"
echo "peak ratio predict / train         $(echo "scale=3; $p_kib / $t_kib" | bc) (target <= 0.5)"
echo "peak ratio with embeddings / train $(echo "scale=3; $e_kib / $t_kib" | bc)"
echo "predictions = train --predictions-out, byte for byte"
