"""Shared fixtures: the CLI binary the package is compared with, Cora converted once."""
import os
import subprocess
import sys

import pytest

SOURCE = os.environ.get("HALO_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
HALO = os.environ.get("HALO_BINARY", "halo")
# OGB asks PyPI for its latest version when imported (a thread calling the `outdated`
# package, whatever OUTDATED_IGNORE says); tests send no traffic off the machine, so `outdated`
# is made unimportable (OGB then skips the check). NO_VERSION_CHECK is that line for the
# subprocesses that import OGB.
NO_VERSION_CHECK = "import sys; sys.modules['outdated'] = None\n"
sys.modules["outdated"] = None


def cli(*args, check=True):
    """Runs the halo executable; its CompletedProcess (text)."""
    r = subprocess.run([HALO, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("halo %s: %s" % (" ".join(map(str, args)), r.stderr))
    return r


@pytest.fixture(scope="session")
def cora(tmp_path_factory):
    """The bundled Cora, converted by the CLI."""
    out = tmp_path_factory.mktemp("data") / "cora"
    cli("convert", os.path.join(SOURCE, "datasets", "cora"), "-o", out)
    return str(out)
