"""sweep(): a parameter grid locally and on a Dask LocalCluster, with the same numbers."""

import pandas as pd
import pytest

import demandflight as dfl


@pytest.fixture(scope="module")
def grid(scenarios):
    return {"trace": [scenarios / "session_churn.jsonl"],
            "policy": ["always-abort", "keep-partial"],
            "client_bandwidth_Bps": [6_000_000, 25_000_000],
            "cache_bytes": [500_000_000, 4_000_000_000]}


def test_a_local_sweep_runs_every_combination(grid):
    table = dfl.sweep(grid, jobs=2, regret=False)
    assert len(table) == 2 * 2 * 2
    assert set(table.columns) >= {"trace", "policy", "client_bandwidth_Bps", "cache_bytes", "gb",
                                  "wasted_gb", "critical_p95_s", "score"}
    # More bandwidth, lower latency; keeping partials wastes less than aborting.
    by = table.set_index(["policy", "client_bandwidth_Bps", "cache_bytes"])
    assert (by.loc[("always-abort", 25_000_000, 4_000_000_000), "p95_s"] <
            by.loc[("always-abort", 6_000_000, 4_000_000_000), "p95_s"])
    assert (by.loc[("keep-partial", 6_000_000, 4_000_000_000), "wasted_gb"] <
            by.loc[("always-abort", 6_000_000, 4_000_000_000), "wasted_gb"])


def test_a_sweep_point_has_the_figures_compare_reports(scenarios):
    trace = scenarios / "flaky_network.jsonl"
    row = dfl.sweep({"trace": [trace], "policy": ["keep-partial"], "seed": [1]}).iloc[0]
    table = dfl.compare(trace, policies=["keep-partial"])
    expected = table[table["policy"] == "keep-partial"].iloc[0]
    for column in ("gb", "wasted_gb", "p50_s", "p95_s", "p99_s", "critical_p95_s",
                   "deadline_misses", "cache_hits", "pollution_s", "score"):
        assert row[column] == pytest.approx(expected[column], rel=1e-9, abs=1e-9), column


def test_metrics_scores_with_the_weights_given_and_refuses_unknown_ones(scenarios):
    result = dfl.simulate(scenarios / "flaky_network.jsonl", policy="keep-partial")
    plain = dfl.metrics(result.raw)
    assert dfl.DEFAULT_WEIGHTS["gb"] == 1.0 and dfl.DEFAULT_WEIGHTS["wasted_gb"] == 0.0
    heavier = dfl.metrics(result.raw, {"gb": 3.0})
    assert heavier["score"] == pytest.approx(plain["score"] + 2.0 * plain["gb"])
    with pytest.raises(ValueError, match="weights: unknown weight \"speed\""):
        dfl.metrics(result.raw, {"speed": 1.0})
    with pytest.raises(ValueError, match="weights: gb=-1 is not a non-negative number"):
        dfl.metrics(result.raw, {"gb": -1.0})


def test_a_sweep_on_a_dask_local_cluster_gives_the_same_numbers_as_the_local_run(grid):
    distributed = pytest.importorskip("distributed")
    local = dfl.sweep(grid, jobs=2, regret=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        client.wait_for_workers(2, timeout=120)  # Started, and known to this client.
        assert len(client.scheduler_info()["workers"]) == 2
        remote = dfl.sweep(grid, client=client, regret=False)
    keys = ["policy", "client_bandwidth_Bps", "cache_bytes"]
    pd.testing.assert_frame_equal(local.sort_values(keys).reset_index(drop=True),
                                  remote.sort_values(keys).reset_index(drop=True))


def test_a_sweep_has_seeds_regret_generated_traces_unique_names_and_progress(scenarios):
    spec = "gen:session_churn:demands=300"
    churn = scenarios / "session_churn.jsonl"
    seen = []
    table = dfl.sweep({"trace": [spec, churn, dfl.Trace.load(churn)],
                       "policy": ["always-abort", "keep-partial"], "seed": [3, 4]},
                      jobs=2, regret=True, progress=lambda done, total: seen.append((done, total)))
    # Three traces x two seeds x (two policies + the oracle).
    assert len(table) == 3 * 2 * 3 and seen[-1] == (18, 18) and len(seen) == 18
    assert sorted(table.trace.unique()) == sorted([spec, "session_churn", "session_churn#2"])
    assert set(table.seed) == {3, 4}
    # The same numbers as compare's, regret and vs_oracle included.
    expected = dfl.compare(spec, policies=["always-abort", "keep-partial"], seeds=2,
                           first_seed=3, runs=True)[1]
    mine = table[table.trace == spec]
    for _, row in expected.iterrows():
        got = mine[(mine.policy == row.policy) & (mine.seed == row.seed)].iloc[0]
        for column in ("score", "regret", "vs_oracle", "gb", "service_rate"):
            assert got[column] == pytest.approx(row[column], rel=1e-9, abs=1e-9), column
    assert (table[table.policy == "oracle"].regret == 0).all()
    assert (table.regret >= -1e-12).all(), "no policy below the oracle"
    # A generated trace differs with its seed; a trace file only if it retries.
    gen = table[(table.trace == spec) & (table.policy == "always-abort")].set_index("seed")
    assert gen.loc[3, "gb"] != gen.loc[4, "gb"]


def test_sweep_refuses_bad_points_before_any_process_starts(scenarios):
    churn = scenarios / "session_churn.jsonl"
    with pytest.raises(ValueError, match="grid: policy: "):
        dfl.sweep({"trace": [churn], "policy": ["sometimes"]})
    with pytest.raises(ValueError, match="max_transfers"):
        dfl.sweep({"trace": [churn], "max_transfers": [0]})
    with pytest.raises(TypeError, match="grid: unknown name 'speed'"):
        dfl.sweep({"trace": [churn], "speed": [1]})
    with pytest.raises(ValueError, match="grid: trace: gen:nothing"):
        dfl.sweep({"trace": ["gen:nothing"]})
    with pytest.raises(ValueError, match="grid: seed"):
        dfl.sweep({"trace": [churn], "seed": [-1]})


def test_sweep_resamples_owners_and_warns_when_seeds_cannot_differ(scenarios):
    churn = scenarios / "session_churn.jsonl"
    with pytest.warns(UserWarning, match="seeds gave identical scores .*resample='owners' "
                                         "varies its workload"):
        plain = dfl.sweep({"trace": [churn], "seed": [1, 2]}, jobs=2)
    assert plain.score.nunique() == 1
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Replications that vary: no warning.
        resampled = dfl.sweep({"trace": [churn], "seed": [1, 2], "resample": ["owners"]},
                              jobs=2)
    assert resampled.score.nunique() == 2, "each seed a bootstrap of the owners"
    assert set(resampled["resample"]) == {"owners"}
    with pytest.raises(ValueError, match="grid: resample must be 'none' or 'owners'"):
        dfl.sweep({"trace": [churn], "resample": ["everything"]})


def test_the_python_guides_dask_script_runs_as_written(tmp_path, scenarios):
    """docs/python.md's `sweep_dask.py`, with its `__main__` guard, as a script."""
    pytest.importorskip("distributed")
    import os
    import subprocess
    import sys
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    block = next(b for b in text.split("```python\n")[1:] if "# sweep_dask.py" in b)
    code = "\n".join(line[2:] if line.startswith("  ") else line
                     for line in block.split("```", 1)[0].splitlines())
    (tmp_path / "scenarios").symlink_to(scenarios)
    (tmp_path / "sweep_dask.py").write_text(code)
    proc = subprocess.run([sys.executable, "sweep_dask.py"], cwd=tmp_path, env=dict(os.environ),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "keep-partial" in proc.stdout and "score" in proc.stdout
