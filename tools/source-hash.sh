#!/usr/bin/env bash
# One hash over halo's C++/CUDA sources and build files, computed the same way with or without
# git (the GPU machine gets a copy of the tree, maybe without .git): gpu-bundle.sh stores it in
# the bundle and gpu-check.sh compares it with the tree it runs in.
set -euo pipefail
cd "$(dirname "$0")/.."
find CMakeLists.txt graph partition gnn runtime tools tests -type f \
  \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name 'CMakeLists.txt' \) -print0 |
  LC_ALL=C sort -z | xargs -0 sha1sum | sha1sum | cut -c1-16
