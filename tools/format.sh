#!/usr/bin/env bash
# clang-format-14 (style in .clang-format) over every tracked C++ and CUDA file (*.h *.cc *.cu).
#   tools/format.sh           reformat in place (`make format`)
#   tools/format.sh --check   change nothing; list each file that is not formatted and fail
#                             (`make format-check`, CI)
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -- '*.h' '*.cc' '*.cu')
if [[ "${1:-}" == --check ]]; then
  bad=0
  for f in "${files[@]}"; do
    clang-format-14 --dry-run --Werror "$f" >/dev/null 2>&1 || { echo "format: $f" >&2; bad=$((bad + 1)); }
  done
  ((bad == 0)) || { echo "format: $bad of ${#files[@]} files differ from .clang-format (tools/format.sh fixes them)" >&2; exit 1; }
  echo "format: ${#files[@]} files formatted" >&2
else
  clang-format-14 -i "${files[@]}"
fi
