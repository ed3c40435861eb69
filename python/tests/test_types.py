"""The package's annotations (py.typed, _halo.pyi) are real: mypy accepts the package and code
that uses it correctly, and reports code that passes the wrong types."""
import os
import subprocess
import sys
import textwrap

import pytest

import halo

GOOD = """
import numpy as np
import halo

d: halo.Dataset = halo.write_dataset("g", edge_index=np.zeros((2, 1), np.int64), num_nodes=2)
offsets, indices = d.csr
report = halo.partition("g", 2, "g-2", method="metis")
cut: int = report["edge_cut"]
summary, pred = halo.train("g", predictions=True, epochs=1)
quiet = halo.train("g", verbose=False, epochs=1)
flat = halo.write_dataset("h", edge_index=np.zeros((2, 1), np.int64), num_nodes=2,
                          splits={"train": [0], "valid": [1], "test": np.array([1])})
try:
    halo.Dataset.open("missing")
except halo.InputError as e:
    print(str(e))
"""

BAD = """
import halo

d: halo.Dataset = halo.Dataset.open("g", validate="yes")
halo.partition("g", "two", "g-2")
"""


def mypy(tmp_path, code):
    pytest.importorskip("mypy", reason="mypy is not installed")
    f = tmp_path / "client.py"
    f.write_text(textwrap.dedent(code))
    package = os.path.dirname(os.path.dirname(os.path.abspath(halo.__file__)))
    env = dict(os.environ, MYPYPATH=package)
    return subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports",
                           "--no-incremental", "--cache-dir", os.devnull,
                           os.path.join(package, "halo"), str(f)],
                          cwd=tmp_path, env=env, capture_output=True, text=True)


def test_mypy_accepts_the_package_and_correct_use(tmp_path):
    r = mypy(tmp_path, GOOD)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_reports_wrong_types(tmp_path):
    r = mypy(tmp_path, BAD)
    assert r.returncode == 1, r.stdout + r.stderr
    assert 'Argument "validate" to "open" of "Dataset" has incompatible type "str"' in r.stdout
    assert 'Argument 2 to "partition" has incompatible type "str"' in r.stdout
