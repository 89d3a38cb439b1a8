"""Shared fixtures: where the scenarios and the CLI are (CTest passes them in the
environment; the defaults fit a run from the source tree after `make test`)."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def scenarios() -> Path:
    return Path(os.environ.get("DFL_SCENARIOS", ROOT / "scenarios"))


@pytest.fixture(scope="session")
def cli() -> str:
    import demandflight._compare as c
    return os.environ.get("DEMANDFLIGHT_CLI", str(c.CLI))
