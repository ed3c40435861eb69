#!/usr/bin/env bash
# Puts KaMinPar's Python package (PyPI `kaminpar`, with numpy) in a virtual environment at DIR,
# for `halo partition --method kaminpar` (HALO_PYTHON=DIR/bin/python) and its tests. Best
# effort: without a network it says so and exits 0, and the KaMinPar tests skip, saying why.
#   tools/install-kaminpar.sh DIR
set -uo pipefail
dir=${1:?usage: tools/install-kaminpar.sh DIR}
if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c 'import kaminpar, numpy' 2>/dev/null; then
  exit 0
fi
bash "$(dirname "$0")/install-deps.sh" --python || exit 0
if ! python3 -m venv "$dir" > /dev/null 2>&1; then
  echo "install-kaminpar: cannot make a venv in $dir; the --method kaminpar tests will skip" >&2
  exit 0
fi
if ! timeout 600 "$dir/bin/pip" install -q kaminpar numpy > "$dir/pip.log" 2>&1; then
  echo "install-kaminpar: pip install kaminpar failed (offline? see $dir/pip.log);" \
    "the --method kaminpar tests will skip" >&2
fi
exit 0
