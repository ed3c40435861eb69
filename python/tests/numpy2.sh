#!/usr/bin/env bash
# Runs one file of python/tests with PY, the venv `make test` makes (tools/install-kaminpar.sh:
# NumPy 2, pytest, SciPy), so that the package, built against Debian's NumPy 1, is tested under
# NumPy 2 too (issue #35, class 17). Exits 77 (ctest: skipped) with the reason where PY is
# missing, has no NumPy 2 or pytest, or cannot load the extension (another Python ABI).
#   numpy2.sh PY TEST_FILE   (PYTHONPATH: the build's python folder)
set -uo pipefail
py=$1
test=$2
if [ ! -x "$py" ]; then
  echo "skipped: no $py (make test makes that venv with tools/install-kaminpar.sh when PyPI" \
    "is reachable)"
  exit 77
fi
if ! why=$("$py" - 2>&1 << 'END'
import glob, importlib.machinery, os, sys
try:
    import numpy, pytest
except ImportError as e:
    sys.exit("it has no %s" % e.name)
if int(numpy.__version__.split(".")[0]) < 2:
    sys.exit("its NumPy is %s" % numpy.__version__)
ext = [os.path.basename(p) for d in os.environ.get("PYTHONPATH", "").split(os.pathsep)
       for p in glob.glob(os.path.join(d, "halo", "_halo.*"))]
if ext and not any(e.endswith(s) for e in ext for s in importlib.machinery.EXTENSION_SUFFIXES):
    sys.exit("it cannot load %s (Python %s)" % (ext[0], sys.version.split()[0]))
END
); then
  echo "skipped: $py: $why"
  exit 77
fi
echo "NumPy $("$py" -c 'import numpy; print(numpy.__version__)') ($py)"
exec "$py" -m pytest -q -p no:cacheprovider "$test"
