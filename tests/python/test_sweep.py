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
    table = dfl.sweep(grid, jobs=2)
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
    local = dfl.sweep(grid, jobs=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        client.wait_for_workers(2, timeout=120)  # Started, and known to this client.
        assert len(client.scheduler_info()["workers"]) == 2
        remote = dfl.sweep(grid, client=client)
    keys = ["policy", "client_bandwidth_Bps", "cache_bytes"]
    pd.testing.assert_frame_equal(local.sort_values(keys).reset_index(drop=True),
                                  remote.sort_values(keys).reset_index(drop=True))
