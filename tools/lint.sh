#!/usr/bin/env bash
# `make lint`: clang-tidy-14 (checks in .clang-tidy, every finding an error) over the C++ sources
# of the build's compile_commands.json: every .cc file of the libraries, the tool, the benchmarks
# and the tests. CUDA sources (.cu) are left out: clang-tidy cannot use nvcc's command lines.
# Headers are checked through the sources that include them.
#
#   tools/lint.sh [--changed [BASE]] [BUILD_DIR]     (BUILD_DIR defaults to build/, configured)
#
# --changed lints only the sources that differ from BASE (default: the merge base with
# origin/main, or the previous commit when that is HEAD itself), working-tree changes included.
# CI uses it: the whole tree (~110 sources) takes 15 min of CPU, ~8 min on two idle cores.
# A changed header alone selects no source.
set -euo pipefail
cd "$(dirname "$0")/.."
changed=0 base=""
if [[ "${1:-}" == --changed ]]; then
  changed=1
  shift
  if [[ -n "${1:-}" && ! -d "$1" ]]; then base=$1; shift; fi
fi
build=${1:-build}
[[ -f "$build/compile_commands.json" ]] || {
  echo "lint: no $build/compile_commands.json: configure first (make configure)" >&2; exit 2; }

mapfile -t files < <(python3 -c '
import json, os, sys
root = os.getcwd() + "/"
seen = set()
for e in json.load(open(sys.argv[1])):
    f = os.path.normpath(os.path.join(e["directory"], e["file"]))
    if f.endswith(".cc") and f.startswith(root) and f not in seen:
        seen.add(f)
        print(f[len(root):])
' "$build/compile_commands.json" | sort)

if ((changed)); then
  if [[ -z "$base" ]]; then  # on main itself the merge base is HEAD: take the last commit
    base=$(git merge-base HEAD origin/main 2>/dev/null || true)
    [[ -n "$base" && "$base" != "$(git rev-parse HEAD)" ]] || base=$(git rev-parse -q --verify HEAD~1 || true)
  fi
  if [[ -n "$base" ]]; then  # else (a one-commit shallow clone) every source
    mapfile -t diff < <(git diff --name-only "$base" -- '*.cc')
    mapfile -t files < <(comm -12 <(printf '%s\n' "${files[@]}") <(printf '%s\n' "${diff[@]}" | sort))
    echo "lint: ${#files[@]} source(s) changed since ${base:0:12}" >&2
  fi
fi
((${#files[@]})) || exit 0

# Compiler warnings are GCC's job (-Werror in CI); two clang-only ones are not findings: GCC
# warning flags clang does not know, and OpenBLAS's header using C99 _Complex under -Wpedantic.
printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "${JOBS:-2}" clang-tidy-14 -p "$build" --quiet \
        --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-c99-extensions 2> >(grep -v 'warnings\? generated\.$' >&2) ||
  { echo "lint: clang-tidy found problems (above)" >&2; exit 1; }
echo "lint: ${#files[@]} source(s) clean" >&2
