"""The notebooks run from top to bottom with nbclient and write their figures."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(os.environ.get("DFL_NOTEBOOKS", Path(__file__).resolve().parents[2] / "notebooks"))

FIGURES = {
    "three_callers": ["three_callers_demands.png", "three_callers_tasks.png"],
    "policy_comparison": ["policy_pareto.png", "policy_regret.png", "policy_paired.png",
                          "policy_latency_by_served.png"],
    "sweep": ["sweep_best_policy.png"],
    "imported_workloads": ["imported_workloads.png"],
}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_the_notebook_executes_and_writes_its_figures(name, tmp_path, monkeypatch, scenarios):
    path = NOTEBOOKS / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, \
                f"{path.name} is committed with outputs"
    import demandflight  # The kernel imports the package this test process imports.
    package_root = str(Path(demandflight.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    monkeypatch.setenv("DFL_FIGURES", str(tmp_path))
    monkeypatch.setenv("DFL_SCENARIOS", str(scenarios))
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    for figure in FIGURES[name]:
        png = tmp_path / figure
        assert png.exists(), f"{name} did not write {figure}"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 5000, "an empty plot"
