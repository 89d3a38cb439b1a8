"""dfl.describe(): the figures of a small hand-written trace as DataFrames.

The trace is tests/format/describe_test.cpp's (the hand calculations are there): a
platform and network model (cm02) where a lone transfer of S bytes takes S/1000 + 1 s; key A (ids a and a2,
1000 B) asked 6 times, B (2000 B) 3 times, C (3000 B) twice.
"""

import math

import pytest

import demandflight as dfl


def hand_trace():
    b = dfl.TraceBuilder("hand", 1, client_bandwidth_Bps=1000, client_latency_s=0.5,
                         origins={"cdn": {"bandwidth_Bps": 2000, "latency_s": 0.5}},
                         network_model="cm02")
    b.artifact("a", "a", "r1", 1000).artifact("a2", "a", "r1", 1000)
    b.artifact("b", "b", "r1", 2000).artifact("c", "c", "r1", 3000)
    b.artifact("unused", "u", "r1", 5000)
    (b.subscribe(0, "d1", "u1", "a", 1)
      .subscribe(1, "d2", "u2", "a2", 1)
      .subscribe(1, "d3", "u1", "b", 2)
      .cancel(2, "d3")
      .subscribe(3, "d4", "u3", "c", 1)
      .set_priority(3.5, "d4", 3)
      .subscribe(4, "d5", "u2", "b", 0)
      .end_owner(5, "u3")
      .subscribe(6, "d6", "u1", "a", 1)
      .subscribe(6.5, "d7", "u2", "a", 1)
      .subscribe(7, "d8", "u1", "b", 1)
      .set_priority(7.5, "d8", 0)
      .subscribe(8, "d9", "u3", "c", 1)
      .subscribe(9, "d10", "u1", "a2", 1, timeout_s=0.5)
      .subscribe(9.2, "d11", "u2", "a", 1)
      .cancel(9.6, "d10"))
    return b.build()


def lone_demand(network_model, cancel_at=None):
    """One demand for 1 MB from the default platform, cancelled at `cancel_at`."""
    b = dfl.TraceBuilder("lone", 1, network_model=network_model)
    b.artifact("x", "x.bin", "r1", 1_000_000)
    b.subscribe(0, "d1", "u1", "x", 1)
    if cancel_at is not None:
        b.cancel(cancel_at, "d1")
    return b.build()


@pytest.mark.parametrize("network_model", ["tcp", "calibrated", "cm02", "lv08"])
def test_in_flight_is_what_a_simulation_of_the_trace_aborts(network_model):
    # The lone transfer that describe assumes is the one the model simulates: a cancel
    # a little before the simulated transfer's end is in flight (the simulation aborts
    # the transfer, its bytes are wasted), one a little after is not (the bytes arrived).
    received = dfl.simulate(lone_demand(network_model)).tasks.t_received[0]
    for fraction, in_flight in ((0.95, True), (1.05, False)):
        trace = lone_demand(network_model, cancel_at=fraction * received)
        description = dfl.describe(trace)
        orphans = description.raw["orphans"]
        assert orphans["lone_transfer_model"] == network_model
        assert orphans["cancelled_in_flight"] == int(in_flight), (network_model, fraction)
        wasted = dfl.simulate(trace).summary["bytes_wasted"]
        assert (wasted > 0) == in_flight, (network_model, fraction, wasted)


def test_summary_counts_and_fit():
    s = dfl.describe(hand_trace()).summary
    assert s["trace"] == "hand"
    assert s["requests"] == 11
    assert s["keys"] == 3
    assert s["artifact_ids"] == 5
    assert s["aliased_keys"] == 1
    assert s["requested_bytes"] == 18000
    assert s["unique_bytes"] == 6000
    assert (s["cancels"], s["set_priorities"], s["end_owners"], s["owners"]) == (2, 2, 1, 3)
    assert s["duration_s"] == pytest.approx(9.6)
    # Counts 6, 3, 2 = 6 / rank: alpha 1, a perfect fit.
    assert s["zipf_alpha"] == pytest.approx(1.0, abs=1e-12)
    assert s["zipf_r2"] == pytest.approx(1.0, abs=1e-12)
    assert s["one_hit_wonders"] == 0
    assert s["top_10pct_share"] == pytest.approx(6 / 11)
    assert s["cold_requests"] == 3 and s["reuses"] == 8


def test_popularity_table():
    d = dfl.describe(hand_trace())
    p = d.popularity
    assert list(p["key"]) == ["a@r1/pc#0", "b@r1/pc#0", "c@r1/pc#0"]
    assert list(p["rank"]) == [1, 2, 3]
    assert list(p["requests"]) == [6, 3, 2]
    assert list(p["share"]) == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    assert list(p["cumulative_share"]) == pytest.approx([6 / 11, 9 / 11, 1.0])
    assert list(p["size_bytes"]) == [1000, 2000, 3000]
    top = dfl.describe(hand_trace(), top=1).popularity
    assert list(top["key"]) == ["a@r1/pc#0"]


def test_reuse_and_sizes():
    d = dfl.describe(hand_trace())
    # Reuse times 1 3 5 0.5 3 5 2.5 0.2; distances 0 1 2 0 1 2 2 0 (nearest rank).
    t = d.reuse.loc["time_s"]
    assert t["count"] == 8
    assert (t["p10"], t["p50"], t["p90"], t["p99"]) == pytest.approx((0.2, 2.5, 5, 5))
    assert t["mean"] == pytest.approx(20.2 / 8)
    r = d.reuse.loc["distance"]
    assert (r["p10"], r["p50"], r["p90"], r["p99"], r["mean"]) == (0, 1, 2, 2, 1)
    k = d.sizes.loc["key_bytes"]
    assert (k["count"], k["p10"], k["p50"], k["p90"], k["mean"]) == (3, 1000, 2000, 3000, 2000)
    q = d.sizes.loc["request_bytes"]
    assert (q["count"], q["p50"], q["p90"], q["min"], q["max"]) == (11, 1000, 3000, 1000, 3000)


def test_opportunities_and_priorities():
    d = dfl.describe(hand_trace())
    o = d.opportunity
    # d2, d7, d11 come while an earlier demand of their key is in its window.
    assert o.loc["single_flight", "count"] == 3
    assert o.loc["single_flight", "share"] == pytest.approx(3 / 11)
    assert o.loc["single_flight", "saved_bytes"] == 3000
    # d3 cancelled at 2 (window to 4), d4's owner ended at 5 (window to 7); d10's
    # cancel at 9.6 is after its timeout at 9.5.
    assert o.loc["cancelled_in_flight", "count"] == 1
    assert o.loc["owner_ended_in_flight", "count"] == 1
    assert o.loc["orphans", "count"] == 2
    assert o.loc["cancelled_in_flight", "ended"] == 2  # d3 and d10.
    assert o.loc["orphans", "ended"] == 3
    assert o.loc["orphans", "share"] == pytest.approx(2 / 11)
    assert o.loc["orphans", "came_back"] == 2
    assert o.loc["orphans", "came_back_p50_s"] == 2  # B after 2 s, C after 3 s.
    p = d.priorities
    assert list(p["priority"]) == [0, 1, 2]
    assert list(p["demands"]) == [1, 9, 1]
    s = d.summary
    assert (s["priority_raises"], s["priority_lowers"], s["demands_reprioritized"]) == (1, 1, 2)


def test_a_path_gives_what_the_trace_gives(tmp_path):
    trace = hand_trace()
    trace.save(tmp_path / "hand.jsonl")
    assert dfl.describe(tmp_path / "hand.jsonl").raw == dfl.describe(trace).raw
    assert dfl.describe(str(tmp_path / "hand.jsonl")).raw == dfl.describe(trace).raw


def test_the_cli_writes_the_same_json(cli, tmp_path):
    import json
    import subprocess
    trace = hand_trace()
    trace.save(tmp_path / "hand.jsonl")
    subprocess.run([cli, "describe", str(tmp_path / "hand.jsonl"), "--json",
                    str(tmp_path / "d.json"), "--top", "0"], check=True, capture_output=True)
    assert json.loads((tmp_path / "d.json").read_text()) == dfl.describe(trace).raw


def test_an_empty_trace_has_nan_quantiles():
    d = dfl.describe(dfl.TraceBuilder("empty").build())
    assert d.summary["requests"] == 0
    assert math.isnan(d.reuse.loc["time_s", "p50"])
    assert math.isnan(d.summary["zipf_alpha"])
    assert d.popularity.empty


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(TypeError, match="trace"):
        dfl.describe(42)
    with pytest.raises(ValueError, match="top"):
        dfl.describe(hand_trace(), top=0)
    with pytest.raises(TypeError, match="top"):
        dfl.describe(hand_trace(), top="3")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "demandflight-trace", "version": 1, "name": "x"}\n'
                   '{"op": "subscribe", "t": 0, "demand": "d", "owner": "o", "artifact": "zz", '
                   '"priority": 1}\n')
    with pytest.raises(dfl.TraceError, match=r"bad.jsonl:2: artifact"):
        dfl.describe(bad)
