"""Shared fixtures: where the scenarios and the CLI are (CTest passes them in the
environment; the defaults fit a run from the source tree after `make test`)."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def loopback_server(www: Path):
    """The backend tests' loopback HTTP server serving `www`; yields its base URL."""
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "backend" /
                                                   "loopback_server.py"), "--root", str(www)],
                              stdout=subprocess.PIPE, text=True)
    try:
        yield f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}"
    finally:
        server.kill()
        server.wait()


@pytest.fixture(scope="session")
def scenarios() -> Path:
    return Path(os.environ.get("DFL_SCENARIOS", ROOT / "scenarios"))


@pytest.fixture(scope="session")
def cli() -> str:
    import demandflight._compare as c
    return os.environ.get("DEMANDFLIGHT_CLI", str(c.CLI))
