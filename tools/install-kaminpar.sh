#!/usr/bin/env bash
# Puts KaMinPar's Python package (PyPI `kaminpar`) in a virtual environment at DIR, for
# `halo partition --method kaminpar` (HALO_PYTHON=DIR/bin/python) and its tests, with NumPy 2,
# pytest and SciPy for the Python package's tests under NumPy 2 (ctest python.numpy2.*; the
# build compiles against Debian's NumPy 1). The venv is made from PYTHON (default: Debian's
# /usr/bin/python3, the interpreter the build compiles the extension for), so that the extension
# loads in it. Best effort: without a network it says so and exits 0, and those tests skip,
# saying why.
#   tools/install-kaminpar.sh DIR [PYTHON]
set -uo pipefail
dir=${1:?usage: tools/install-kaminpar.sh DIR [PYTHON]}
python=${2:-}
if [ -z "$python" ]; then
  if [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; else python=python3; fi
fi
ready='import kaminpar, numpy, pytest, scipy, sys; sys.exit(int(numpy.__version__.split(".")[0]) < 2)'
if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "$ready" 2>/dev/null; then
  exit 0
fi
bash "$(dirname "$0")/install-deps.sh" --python || exit 0
if ! "$python" -m venv "$dir" > /dev/null 2>&1; then
  echo "install-kaminpar: cannot make a venv in $dir; the --method kaminpar and NumPy 2" \
    "tests will skip" >&2
  exit 0
fi
if ! timeout 600 "$dir/bin/pip" install -q kaminpar 'numpy>=2' pytest scipy > "$dir/pip.log" 2>&1; then
  echo "install-kaminpar: pip install kaminpar numpy pytest scipy failed (offline? see" \
    "$dir/pip.log); the --method kaminpar and NumPy 2 tests will skip" >&2
fi
exit 0
