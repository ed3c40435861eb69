"""python/README.md's example runs as written (with halo and mpirun on PATH), where PyTorch
Geometric and OGB are installed."""
import os
import re
import subprocess
import sys

import pytest

from conftest import HALO, NO_VERSION_CHECK, SOURCE


def example():
    with open(os.path.join(SOURCE, "python", "README.md")) as f:
        text = f.read()
    return re.search(r"## Example.*?```python\n(.*?)```", text, re.S).group(1)


def test_the_example_is_fifteen_lines_or_so():
    lines = [l for l in example().splitlines() if l.strip()]
    assert 10 <= len(lines) <= 18, len(lines)


def test_the_example_runs(tmp_path):
    pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed")
    pytest.importorskip("ogb", reason="OGB is not installed")
    import halo
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(halo.__file__))),
               PATH=os.path.dirname(os.path.abspath(HALO)) + os.pathsep + os.environ["PATH"])
    r = subprocess.run([sys.executable, "-c", NO_VERSION_CHECK + example()], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    acc = float(re.search(r"\{'acc': ([0-9.]+)\}", r.stdout).group(1))
    assert acc > 0.8, r.stdout  # the communities are learnable
