#!/usr/bin/env bash
# `make format-check` runs this too: no source file of the libraries, the tool or the Python
# package over 600 lines, so that a file reads as one idea (issue #37). Tests and data are left
# out. A file may stay longer only when tools/size-allow.txt names it with a ceiling (its size
# when listed) and a reason: kernels and option tables, and the debts still to split, which may
# shrink but never grow. A listed file that shrank below 600 must leave the list.
#
#   tools/size-check.sh        (exit 1 naming each file over its limit)
set -euo pipefail
cd "$(dirname "$0")/.."
limit=600
declare -A ceiling
while read -r path max _; do
  [[ -z "$path" || "$path" == \#* ]] && continue
  ceiling[$path]=$max
done < tools/size-allow.txt
status=0
while IFS= read -r f; do
  n=$(wc -l < "$f")
  max=${ceiling[$f]:-$limit}
  if ((n > max)); then
    if [[ -n "${ceiling[$f]:-}" ]]; then
      echo "size: $f has $n lines, over its ceiling of $max in tools/size-allow.txt: split it" >&2
    else
      echo "size: $f has $n lines, over $limit: split it by idea (or, for a kernel or an option table, list it in tools/size-allow.txt with a reason)" >&2
    fi
    status=1
  elif [[ -n "${ceiling[$f]:-}" ]] && ((n <= limit)); then
    echo "size: $f has $n lines now: remove it from tools/size-allow.txt" >&2
    status=1
  fi
done < <(git ls-files 'graph/*.cc' 'graph/*.h' 'partition/*.cc' 'partition/*.h' 'gnn/*.cc' 'gnn/*.h' \
  'gnn/*.cu' 'runtime/*.cc' 'runtime/*.h' 'tools/*.cc' 'tools/*.h' 'tools/*.py' 'tools/*.sh' 'python/*.py' \
  'python/*.cc')
for path in "${!ceiling[@]}"; do
  [[ -f $path ]] || { echo "size: tools/size-allow.txt lists $path, which does not exist" >&2; status=1; }
done
exit $status
