#!/usr/bin/env bash
# Packs what tools/gpu-check.sh needs on a GPU machine that has the CUDA toolkit but none of
# halo's other dependencies and no package registry: halo's CUDA build from here (binaries,
# tests, benchmarks), the shared libraries they need beyond glibc and CUDA, and Open MPI (with
# the external PMIx Debian builds it against) laid out to be relocated with OPAL_PREFIX. Writes
# .gpu-bundle.tar.xz (git-ignored) in the repo root; name it in the device tool's `carry`.
#
#   tools/gpu-bundle.sh [BUILD_DIR]
#
# The bundle records a hash of the sources it was built from (SOURCE; gpu-check.sh warns when
# the tree it runs in differs). Where `unshare` works (root), it is then tried in a mount
# namespace that hides this machine's Open MPI, PMIx, hwloc and libevent, as on the GPU machine:
# two ranks of the bundled mpirun must start the bundled halo.
set -euo pipefail
build=${1:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHALO_CUDA=ON > /dev/null
cmake --build "$build" -j2
stage=$(mktemp -d /tmp/halo-bundle-XXXXXX)
trap 'rm -rf "$stage"' EXIT
lib=/usr/lib/x86_64-linux-gnu
mkdir -p "$stage/bin" "$stage/lib" "$stage/usr/bin" "$stage/usr/lib/x86_64-linux-gnu/pmix2/lib" "$stage/usr/share"
for b in halo gnn_tests runtime_tests distributed_tests predict_tests tool_tests halo_bench_spmm halo_bench_stream; do
  cp "$build/bin/$b" "$stage/bin/"
done
# Every library outside glibc and the CUDA toolkit (the GPU machine brings its own CUDA 13), for
# the binaries, the MPI launcher and the MCA plugins Open MPI and PMIx dlopen (the external PMIx
# component pulls in libpmix and libmunge, which no binary links directly).
for f in "$stage"/bin/* /usr/bin/orterun "$lib"/openmpi/lib/openmpi3/*.so "$lib"/pmix2/lib/pmix/*.so; do
  ldd "$f"
done | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libutil|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt|libcusparse|libnvJitLink|libnccl)\.so' |
  grep -v "^$lib/openmpi/" | while read -r l; do cp -L "$l" "$stage/lib/"; done
# Open MPI (Debian's layout under a prefix; OPAL_PREFIX=<bundle>/usr relocates it) and PMIx's
# plugins (gpu-check.sh points PMIX_MCA_mca_base_component_path at them: PMIx's own config names
# the system path).
cp -L /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$stage/usr/bin/"
ln -s orterun "$stage/usr/bin/mpirun"
cp -a "$lib/openmpi" "$stage/usr/lib/x86_64-linux-gnu/"
rm -rf "$stage/usr/lib/x86_64-linux-gnu/openmpi/include"
cp -a "$lib/pmix2/lib/pmix" "$stage/usr/lib/x86_64-linux-gnu/pmix2/lib/"
cp -a "$lib/pmix2/share" "$stage/usr/lib/x86_64-linux-gnu/pmix2/" 2>/dev/null || true
cp -a /usr/share/openmpi "$stage/usr/share/"
tools/source-hash.sh > "$stage/SOURCE"

# Self-test on a machine made to look like the GPU machine.
if [[ ${HALO_BUNDLE_SELFTEST:-1} == 1 ]] && unshare -m true 2>/dev/null; then
  bash tools/bare-gpu-machine.sh bash -c '
    set -e
    b=$1
    export LD_LIBRARY_PATH=$b/lib:$b/usr/lib/x86_64-linux-gnu/openmpi/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib
    export OPAL_PREFIX=$b/usr PATH=$b/usr/bin:$PATH PMIX_MCA_mca_base_component_path=$b/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
    export OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx,pt2pt OMPI_MCA_mca_base_component_show_load_errors=0
    out=$(timeout 60 "$b/usr/bin/mpirun" --oversubscribe -np 2 "$b/bin/halo" version 2>&1) || true
    [[ $(grep -c "^halo" <<< "$out") -ge 2 ]] || { echo "$out"; exit 1; }
  ' selftest "$stage" || { echo "gpu-bundle: the bundle does not start 2 ranks without the system MPI (above)" >&2; exit 1; }
  echo "gpu-bundle: self-test passed (2 ranks start with the system's Open MPI, PMIx and hwloc hidden)"
fi
tar -C "$stage" -cJf .gpu-bundle.tar.xz .
ls -la .gpu-bundle.tar.xz
