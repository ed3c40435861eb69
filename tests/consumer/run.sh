#!/usr/bin/env bash
# Installs halo's build tree to a temporary prefix, then configures, builds and runs
# tests/consumer against it with find_package(halo): the exported package works for a project
# outside the tree. Usage: run.sh BUILD_DIR CXX_COMPILER
set -euo pipefail
build=$1 cxx=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -x "$work/prefix/bin/halo" && test -x "$work/prefix/bin/halo-rank-supervisor"
"$work/prefix/bin/halo" --version
cmake -S "$here" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/halo_consumer"
