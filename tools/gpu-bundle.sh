#!/usr/bin/env bash
# Packs what tools/gpu-check.sh needs on a GPU machine that has the CUDA toolkit but none of
# halo's other dependencies and no package registry: halo's CUDA build from here (binaries,
# tests, benchmarks), the shared libraries they need beyond glibc and CUDA, and Open MPI laid out
# to be relocated with OPAL_PREFIX. Writes .gpu-bundle.tar.xz (git-ignored) in the repo root;
# name it in the device tool's `carry`.
#
#   tools/gpu-bundle.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHALO_CUDA=ON > /dev/null
cmake --build "$build" -j2
stage=$(mktemp -d /tmp/halo-bundle-XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/usr/bin" "$stage/usr/lib/x86_64-linux-gnu" "$stage/usr/share"
for b in halo gnn_tests runtime_tests distributed_tests tool_tests halo_bench_spmm halo_bench_stream; do
  cp "$build/bin/$b" "$stage/bin/"
done
# Every library outside glibc and the CUDA toolkit (the GPU machine brings its own CUDA 13).
for f in "$stage"/bin/* /usr/bin/orterun; do ldd "$f"; done | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libutil|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt|libcusparse|libnvJitLink|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
# Open MPI (Debian's layout under a prefix; OPAL_PREFIX=<bundle>/usr relocates it).
cp -L /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$stage/usr/bin/"
ln -s orterun "$stage/usr/bin/mpirun"
cp -a /usr/lib/x86_64-linux-gnu/openmpi "$stage/usr/lib/x86_64-linux-gnu/"
rm -rf "$stage/usr/lib/x86_64-linux-gnu/openmpi/include"
cp -a /usr/share/openmpi "$stage/usr/share/"
cp -a /etc/openmpi "$stage/usr/etc" 2>/dev/null || true
tar -C "$stage" -cJf .gpu-bundle.tar.xz .
ls -la .gpu-bundle.tar.xz
