"""Every ```python block of README.md and docs/*.md, run as a reader would run them:
a page's blocks in order, in one interpreter, from a directory that looks like the
repository root (its scenarios, and the files the pages' commands write before them).
A block that no longer runs fails here. docs/python.md's Dask script (a block with a
LocalCluster) runs as its own script in test_sweep.py."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def python_blocks(page: Path):
    text = page.read_text()
    for match in re.finditer(r"^( *)```python\n(.*?)^\1```", text, re.M | re.S):
        yield textwrap.dedent(match.group(2))


@pytest.mark.parametrize("page", [p for p in PAGES if any(python_blocks(p))],
                         ids=lambda p: p.name)
def test_the_python_blocks_of_a_page_run_in_order(page, tmp_path, scenarios, cli):
    (tmp_path / "scenarios").symlink_to(scenarios)
    # What the pages' shell commands write before their Python reads it.
    subprocess.run([cli, "sim", str(scenarios / "three_callers.jsonl"), "--quiet",
                    "--demands-csv", str(tmp_path / "demands.csv.gz")], check=True)
    blocks = [b for b in python_blocks(page) if "LocalCluster" not in b]
    script = "\n".join(f"# --- block {i}\n{b}" for i, b in enumerate(blocks, 1))
    (tmp_path / "page.py").write_text(script)
    run = subprocess.run([sys.executable, "page.py"], cwd=tmp_path, capture_output=True,
                         text=True, env=dict(os.environ, MPLBACKEND="Agg"), timeout=600)
    assert run.returncode == 0, f"{page.name}:\n{run.stderr[-3000:]}"
