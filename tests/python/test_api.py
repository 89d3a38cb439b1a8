"""The Python API: traces in and out, simulate() against the CLI, errors, the engine."""

import json
from pathlib import Path
import subprocess
import sys

import pandas as pd
import pytest

import demandflight as dfl


def build_like(path):
    """Rebuilds a trace file record by record through TraceBuilder."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    h = lines[0]
    p, s = h.get("platform", {}), h.get("scheduler", {})
    b = dfl.TraceBuilder(h["name"], h["seed"], origins=p.get("origins"),
                         client_bandwidth_Bps=p.get("client_bandwidth_Bps"),
                         client_latency_s=p.get("client_latency_s"),
                         disk_write_Bps=p.get("disk_write_Bps"), hash_Bps=p.get("hash_Bps"),
                         max_transfers=s.get("max_transfers"),
                         max_per_origin=s.get("max_per_origin"),
                         cache_bytes=s.get("cache_bytes"), retry=s.get("retry"),
                         breaker=s.get("breaker"))
    for r in lines[1:]:
        op = r.pop("op")
        if op == "artifact":
            b.artifact(r.pop("id"), r.pop("resource"), r.pop("revision"), r.pop("size"), **r)
        elif op == "subscribe":
            b.subscribe(r.pop("t"), r.pop("demand"), r.pop("owner"), r.pop("artifact"),
                        r.pop("priority"), **r)
        elif op == "fault":
            b.fault(r.pop("t"), r.pop("kind"), **r)
        else:
            getattr(b, op)(**r)
    return b.build()


@pytest.mark.parametrize("name", ["three_callers", "flaky_network"])
def test_a_trace_built_in_python_equals_the_same_trace_loaded_from_file(scenarios, name, tmp_path):
    loaded = dfl.Trace.load(scenarios / f"{name}.jsonl")
    built = build_like(scenarios / f"{name}.jsonl")
    assert built == loaded
    assert built.to_dict()["records"] == loaded.to_dict()["records"]
    # Saved and loaded again, it is still the same trace.
    built.save(tmp_path / "again.jsonl")
    assert dfl.Trace.load(tmp_path / "again.jsonl") == loaded
    # A different trace is not equal.
    other = dfl.TraceBuilder("x").artifact("a", "a.bin", "r1", 10).build()
    assert other != loaded


def test_trace_builder_writes_every_record_kind_as_the_cpp_writer_does():
    # tests/format/trace_writer_test.cpp writes the same records through
    # format::TraceWriter and expects the same file: one writer, the same bytes.
    expected = (Path(__file__).resolve().parents[1] / "format" / "data" /
                "every_record_kind.jsonl").read_text(encoding="utf-8")
    b = dfl.TraceBuilder("every kind", 7, client_bandwidth_Bps=12.5e6, client_latency_s=0.01,
                         origins={"cdn": {"bandwidth_Bps": 5e7, "latency_s": 0.03},
                                  "mirror": {"bandwidth_Bps": 2e7}},
                         disk_write_Bps=4e8, hash_Bps=8e8, network_model="cm02",
                         server_congestion_control="bbr", max_transfers=2, max_per_origin=2,
                         cache_bytes=1_000_000_000,
                         retry={"max_attempts": 3, "base_s": 0.5, "cap_s": 8.0, "jitter": 0.2},
                         breaker={"failures": 5, "open_s": 30.0},
                         throttle={"background_at_or_below": 0, "background_Bps": 1e6})
    (b.artifact("rock", 'props/rock "large".mesh', "r3", 25_000_000)
     .artifact("grass", "props/grass\u00e9.mesh", "r3", 1000, generation=2,
               origins=["mirror", "cdn"],
               sha256="9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
     .subscribe(0, "d1", "camera", "rock", 3)
     .subscribe(0.25, "d2", "session", "grass", 1, owner_generation=4, timeout_s=2.5)
     .set_priority(0.5, "d1", -1)
     .throttle(0.75, background_at_or_below=1, background_Bps=2.5e5, overall_Bps=1e7)
     .fault(1, "transfer_error", artifact="rock", count=2, after_fraction=0.5, retryable=False)
     .fault(1, "corrupt", artifact="grass", count=1)
     .fault(1.5, "origin_down", origin="mirror", duration_s=4.0)
     .cancel(2, "d1")
     .end_owner(3.125, "session", 4)
     .end_owner(4, "camera"))
    assert b.text() == expected
    assert len(b.build().to_dict()["records"]) == 10


def test_trace_builder_names_the_argument_a_bad_value_was_given_to():
    with pytest.raises(TypeError, match="size must be an integer, not 1.5"):
        dfl.TraceBuilder("t").artifact("a", "a.bin", "r1", 1.5)
    assert '"size": 1000' in dfl.TraceBuilder("t").artifact("a", "a.bin", "r1", 1e3).text()
    with pytest.raises(ValueError, match=r"retry: unknown field 'tries' \(known: max_attempts"):
        dfl.TraceBuilder("t", retry={"tries": 3})
    with pytest.raises(ValueError, match=r"origins.cdn.latency_s: not a number"):
        dfl.TraceBuilder("t", origins={"cdn": {"latency_s": "fast"}})
    with pytest.raises(ValueError, match="kind must be one of transfer_error, corrupt, "
                                         "origin_down, not 'meteor'"):
        dfl.TraceBuilder("t").fault(1, "meteor", artifact="a")
    with pytest.raises(ValueError, match="fault.retryable: not a bool"):
        dfl.TraceBuilder("t").fault(1, "transfer_error", artifact="a", retryable="no")
    with pytest.raises(ValueError, match="t: not a finite number"):
        dfl.TraceBuilder("t").cancel(float("nan"), "d1")


def test_the_names_of_records_faults_and_outcomes_come_from_the_core():
    assert dfl._core.RECORD_KINDS[0] == "artifact"
    assert "set_priority" in dfl._core.RECORD_KINDS
    assert list(dfl._core.FAULT_KINDS) == ["transfer_error", "corrupt", "origin_down"]
    trace = dfl.Trace.load(Path(__file__).resolve().parents[2] / "scenarios" /
                           "flaky_network.jsonl")
    records = trace.to_dict()["records"]
    assert {r["op"] for r in records} <= set(dfl._core.RECORD_KINDS)
    assert {r["kind"] for r in records if r["op"] == "fault"} == set(dfl._core.FAULT_KINDS)
    assert "owner_ended" in dfl._core.DEMAND_OUTCOMES and "aborted" in dfl._core.TASK_OUTCOMES


def test_the_package_imports_what_a_name_needs_when_it_is_first_used():
    # `import demandflight` (and so every simulation's process) loads neither pandas nor
    # the simulator; a name brings its module; the names are all there.
    code = ("import sys, demandflight as d\n"
            "print(sorted(m for m in ('pandas', 'demandflight._core', 'demandflight._compare')"
            " if m in sys.modules))\n"
            "d.Trace\n"
            "print(sorted(m for m in ('pandas', 'demandflight._core', 'demandflight._compare')"
            " if m in sys.modules))\n"
            "from demandflight import *\n"
            "print(compare.__module__, sorted(set(d.__all__) - set(dir(d))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "['demandflight._core']", "demandflight._compare []"]
    assert set(dfl.__all__) >= {"simulate", "Trace", "compare", "report", "OrphanPolicy"}
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        dfl.simulat


def test_result_fields_match_the_clis_json(scenarios, cli, tmp_path):
    trace = scenarios / "session_churn.jsonl"
    out = tmp_path / "cli.json"
    subprocess.run([cli, "sim", str(trace), "--policy", "squid", "--seed", "5", "--out", str(out),
                    "--quiet"], check=True)
    expected = json.loads(out.read_text())
    result = dfl.simulate(trace, policy="squid", seed=5)
    assert result.raw == expected
    assert result.summary == expected["summary"]
    assert list(result.demands.columns) == list(expected["demands"][0].keys())
    assert len(result.demands) == len(expected["demands"])
    assert (result.demands["outcome"] == [d["outcome"] for d in expected["demands"]]).all()
    assert len(result.tasks) == len(expected["tasks"])
    assert isinstance(result.demands, pd.DataFrame) and isinstance(result.tasks, pd.DataFrame)


@pytest.mark.parametrize("name,model,policy", [
    ("three_callers", "demand", "keep-partial"), ("flaky_network", "callbacks", "always-abort"),
    ("session_churn", "independent", "squid"), ("cache_pressure", "demand", "always-complete")])
def test_the_frames_are_those_of_the_result_jsons_rows(scenarios, cli, tmp_path, name, model,
                                                       policy):
    # The rows come from the simulation's process by column; they make the same DataFrames
    # (values, nulls and dtypes) and the same document as the result JSON the CLI writes.
    out = tmp_path / "cli.json"
    subprocess.run([cli, "sim", str(scenarios / f"{name}.jsonl"), "--model", model, "--policy",
                    policy, "--out", str(out), "--quiet"], check=True)
    expected = json.loads(out.read_text())
    result = dfl.simulate(scenarios / f"{name}.jsonl", model=model, policy=policy)
    pd.testing.assert_frame_equal(result.demands, pd.DataFrame(expected["demands"]))
    pd.testing.assert_frame_equal(result.tasks, pd.DataFrame(expected["tasks"]))
    assert result.raw == expected


def test_result_load_reads_a_cli_result_and_its_decision_log(scenarios, cli, tmp_path):
    trace = scenarios / "session_churn.jsonl"
    out, log = tmp_path / "cli.json", tmp_path / "decisions.jsonl"
    subprocess.run([cli, "sim", str(trace), "--policy", "keep-partial", "--out", str(out),
                    "--decisions", str(log), "--quiet"], check=True)
    loaded = dfl.Result.load(out, decisions=log)
    run = dfl.simulate(trace, policy="keep-partial", decisions=True)
    assert loaded.raw == run.raw and loaded.policy == "keep-partial"
    assert loaded.demands.equals(run.demands) and loaded.tasks.equals(run.tasks)
    assert loaded.decisions.equals(run.decisions)
    # The log and the tasks tell the same decisions.
    d = run.decisions
    assert len(d) > 0 and set(d["decision"]) == {"keep_partial"}
    listed = sum(len(t) for t in run.tasks["orphan_decisions"])
    assert listed == int(d["first_decision"].sum()) == len(d)
    back = d["next_demand_in_s"].notna() & (d["next_demand_in_s"] <= d["horizon_s"])
    assert (d["came_back"] == back).all()
    assert (run.demands["latency_s"] == run.demands["t_end"] - run.demands["t_subscribe"]).all()
    assert dfl.simulate(trace, policy="keep-partial").decisions is None

    with pytest.raises(ValueError, match="decision_horizon_s"):
        dfl.simulate(trace, decisions=True, decision_horizon_s=0)
    with pytest.raises(TypeError, match="decisions"):
        dfl.simulate(trace, decisions="yes")
    with pytest.raises(ValueError, match="session_churn.jsonl: not a demandflight result"):
        dfl.Result.load(trace)  # A trace (JSON lines), not a result.
    (tmp_path / "other.json").write_text('{"format": "something-else"}')
    with pytest.raises(ValueError, match=r"other.json: format: expected"):
        dfl.Result.load(tmp_path / "other.json")
    with pytest.raises(ValueError, match="timeline"):
        loaded.timeline(tmp_path / "t.json")


def test_resampled_owners_vary_a_trace_files_workload_as_the_cli_does(scenarios, cli, tmp_path):
    trace = scenarios / "session_churn.jsonl"
    out = tmp_path / "cli.json"
    subprocess.run([cli, "sim", str(trace), "--resample", "owners", "--seed", "3", "--out",
                    str(out), "--quiet"], check=True)
    three = dfl.simulate(trace, seed=3, resample="owners")
    assert three.raw == json.loads(out.read_text())
    assert dfl.simulate(trace, seed=4, resample="owners").raw["demands"] != three.raw["demands"]
    plain = dfl.simulate(trace, seed=3)
    assert set(three.demands.owner) != set(plain.demands.owner)
    assert any("#" in o for o in three.demands.owner), "an owner drawn twice is renamed"
    with pytest.raises(ValueError, match="resample"):
        dfl.simulate(trace, resample="sessions")
    table = dfl.compare(trace, policies=["always-abort"], seeds=3, resample="owners")
    assert table.set_index("policy").loc["always-abort", "gb_sd"] > 0


def test_the_default_seed_is_the_trace_headers_as_for_the_cli(scenarios, cli, tmp_path):
    trace = scenarios / "flaky_network.jsonl"  # Retries: the seed drives their jitter.
    header_seed = json.loads(trace.read_text().splitlines()[0])["seed"]
    out = tmp_path / "cli.json"
    subprocess.run([cli, "sim", str(trace), "--out", str(out), "--quiet"], check=True)
    default = dfl.simulate(trace)
    assert default.raw == json.loads(out.read_text())
    assert default.raw["seed"] == header_seed
    assert dfl.simulate(trace, seed=header_seed).raw == default.raw
    assert dfl.simulate(trace, seed=header_seed + 1).raw["seed"] == header_seed + 1


def test_simulate_runs_twenty_times_in_one_process(scenarios):
    trace = dfl.Trace.load(scenarios / "three_callers.jsonl")
    seen = {}
    for i in range(20):
        model = ["demand", "callbacks", "independent", "demand"][i % 4]
        policy = ["always-abort", "always-complete", "keep-partial", "oracle", "squid"][i % 5]
        r = dfl.simulate(trace, model=model, policy=policy, seed=i % 2)
        key = (model, policy, i % 2)
        if key in seen:
            assert r.raw == seen[key], "a simulation is deterministic, however many ran before"
        seen[key] = r.raw
        assert r.model == model
    # The three models differ on this trace as docs/design.md §1 says.
    assert seen[("demand", "always-abort", 0)]["summary"] != seen[("callbacks", "always-complete", 1)]["summary"]


def test_overrides_change_the_platform_and_the_scheduler(scenarios):
    trace = dfl.Trace.load(scenarios / "three_callers.jsonl")
    base = dfl.simulate(trace)
    slow = dfl.simulate(trace, client_bandwidth_Bps=1_000_000)
    assert slow.summary["makespan_s"] > 5 * base.summary["makespan_s"]
    three = dfl.simulate(trace, max_transfers=3, max_per_origin=3)  # The header says 1 and 1.
    assert (three.demands["t_end"] != base.demands["t_end"]).any(), "three slots: no queueing"
    assert three.raw == dfl.simulate(trace.with_overrides(max_transfers=3, max_per_origin=3)).raw
    with pytest.raises(TypeError, match="unknown override 'bandwidth'"):
        dfl.simulate(trace, bandwidth=1)


def test_bad_traces_raise_the_clis_file_line_field_message(tmp_path, cli):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "demandflight-trace", "version": 1, "name": "b", "seed": 1}\n'
                   '{"op": "subscribe", "t": 0, "demand": "d1", "owner": "o", "artifact": "nope", "priority": 1}\n')
    with pytest.raises(dfl.TraceError) as e:
        dfl.Trace.load(bad)
    cli_says = subprocess.run([cli, "validate", str(bad)], capture_output=True, text=True)
    assert cli_says.returncode == 2
    assert str(e.value) == cli_says.stderr.strip()
    assert (e.value.file, e.value.line, e.value.field) == (str(bad), 2, "artifact")
    assert isinstance(e.value, ValueError)
    with pytest.raises(dfl.TraceError, match=r"<TraceBuilder t>:2: artifact"):
        dfl.TraceBuilder("t").subscribe(0, "d1", "o", "missing").build()
    with pytest.raises(dfl.TraceError, match=r"<TraceBuilder t>:4: t: goes backwards"):
        (dfl.TraceBuilder("t").artifact("a", "a.bin", "r1", 5)
         .subscribe(1, "d1", "o", "a").cancel(0.5, "d1").build())


def test_every_network_model_runs_from_python_as_from_the_cli(scenarios, cli, tmp_path):
    """ns3 needs ns-3's defaults in the child's environment before SimGrid loads."""
    trace = scenarios / "three_callers.jsonl"
    ends = {}
    for model in ("default", "calibrated", "tcp", "ns3"):
        result = dfl.simulate(trace, network_model=model)
        out = tmp_path / f"{model}.json"
        subprocess.run([cli, "sim", str(trace), "--network-model", model, "--out", str(out),
                        "--quiet"], check=True)
        assert result.raw == json.loads(out.read_text()), model
        ends[model] = result.summary["makespan_s"]
    # Handshakes and slow start make the tcp model's run longer than the flow model's;
    # the default is the tcp model.
    assert ends["tcp"] > ends["calibrated"]
    assert ends["default"] == ends["tcp"]
    with pytest.raises(ValueError, match="network_model: must be one of default, tcp, "
                                         "calibrated, cm02, lv08, ns3"):
        dfl.simulate(trace, network_model="ns4")


def test_the_tcp_model_follows_the_servers_congestion_control():
    """Behind BBR servers an idle connection keeps its window (docs/cli.md, tcp)."""
    def ends(**platform):
        b = dfl.TraceBuilder("idle", max_transfers=1, max_per_origin=1, **platform)
        for name in ("a", "b"):
            b.artifact(name, f"{name}.bin", "r1", 20_000_000)
        trace = b.subscribe(0, "d1", "o", "a").subscribe(6, "d2", "o", "b").build()
        return dfl.simulate(trace, network_model="tcp").demands.set_index("demand")["t_end"]
    cubic, bbr = ends(), ends(server_congestion_control="bbr")
    assert cubic["d1"] == bbr["d1"]
    assert bbr["d2"] < cubic["d2"] - 0.1, "after 4 s idle CUBIC restarts slow start, BBR does not"
    trace = dfl.TraceBuilder("t").artifact("a", "a.bin", "r1", 5).subscribe(0, "d", "o", "a").build()
    assert (dfl.simulate(trace, network_model="tcp", server_congestion_control="bbr").raw["demands"]
            is not None)
    with pytest.raises(ValueError, match="server_congestion_control: must be \"cubic\" or \"bbr\""):
        dfl.simulate(trace, server_congestion_control="vegas")


def test_bad_models_and_policies_are_value_errors(scenarios):
    trace = scenarios / "three_callers.jsonl"
    with pytest.raises(ValueError, match="model"):
        dfl.simulate(trace, model="magic")
    with pytest.raises(ValueError, match='unknown policy "sometimes"'):
        dfl.simulate(trace, policy="sometimes")
    with pytest.raises(ValueError, match="learned needs model=FILE"):
        dfl.simulate(trace, policy="learned")


def test_bad_arguments_are_python_exceptions_naming_the_argument(scenarios):
    # Each is refused before any process starts; none reaches an engine assertion.
    trace = scenarios / "three_callers.jsonl"
    with pytest.raises(ValueError, match=r"^max_transfers: "):
        dfl.simulate(trace, max_transfers=0)
    with pytest.raises(ValueError, match=r"^max_per_origin: "):
        dfl.simulate(trace, max_per_origin=-1)
    with pytest.raises(ValueError, match=r"^cache_bytes: "):
        dfl.simulate(trace, cache_bytes=-5)
    with pytest.raises(ValueError, match=r"^retry_jitter: "):
        dfl.simulate(trace, retry_jitter=7)
    with pytest.raises(ValueError, match=r"^retry_base_s: not a number"):
        dfl.simulate(trace, retry_base_s="slow")
    with pytest.raises(ValueError, match=r"^client_latency_s: not a finite number"):
        dfl.simulate(trace, client_latency_s=float("inf"))
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0"):
        dfl.simulate(trace, seed=-1)
    with pytest.raises(ValueError, match=r"^seeds must be an integer >= 1, not \[1, 2\]"):
        dfl.compare(trace, seeds=[1, 2])
    with pytest.raises(ValueError, match=r"^models: "):
        dfl.compare(trace, models=["magic"])
    with pytest.raises(ValueError, match=r'^policies: unknown policy "sometimes"'):
        dfl.compare(trace, policies=["sometimes"])
    with pytest.raises(TypeError, match=r"^policies: each must be a policy spec or an "):
        dfl.compare(trace, policies=[object()])
    with pytest.raises(ValueError, match=r'^weights: unknown weight "speed"'):
        dfl.compare(trace, weights={"speed": 1})


def test_settings_that_cannot_take_effect_are_warned(scenarios, capfd):
    trace = scenarios / "three_callers.jsonl"  # One origin.
    result = dfl.simulate(trace, max_transfers=50, max_per_origin=2)
    assert len(result.warnings) == 1 and "max_transfers 50 cannot be reached" in result.warnings[0]
    assert "warning: max_transfers 50 cannot be reached" in capfd.readouterr().err
    assert dfl.simulate(trace).warnings == []


def test_timeline_writes_the_perfetto_file(scenarios, tmp_path):
    result = dfl.simulate(scenarios / "three_callers.jsonl")
    result.timeline(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert any(e.get("ph") == "C" for e in events), "a counter track per task"
    assert any(e.get("ph") == "X" for e in events), "slices for transfers and demands"


def test_the_engine_shares_one_transfer_and_delivers_one_terminal_each():
    engine = dfl.Engine(max_transfers=2)
    a, commands = engine.subscribe(0.0, "rock", owner=1, priority=0, size_bytes=1000)
    starts = [c for c in commands if c["type"] == "start_transfer"]
    assert len(starts) == 1 and starts[0]["key"] == dfl.Engine.key("rock")
    b, commands = engine.subscribe(0.1, "rock", owner=2, priority=3)
    assert not [c for c in commands if c["type"] == "start_transfer"], "joined, not a second transfer"
    assert engine.tasks()[0]["effective_priority"] == 3
    commands = engine.cancel(0.2, b)
    assert [c["outcome"] for c in commands if c["type"] == "deliver"] == ["cancelled"]
    assert engine.tasks()[0]["effective_priority"] == 0, "back to the remaining demand's"
    commands = engine.transfer_finished(1.0, starts[0]["transfer"], "ok", 1000)
    finalize = [c for c in commands if c["type"] == "start_finalize"][0]
    commands = engine.finalize_finished(1.1, finalize["finalize"], "installed")
    delivered = [c for c in commands if c["type"] == "deliver"]
    assert [(d["demand"], d["outcome"]) for d in delivered] == [(a, "succeeded")]
    assert engine.stats()["installs"] == 1


def test_mirrors_carry_a_trace_through_an_origin_outage():
    def outage(mirrors):
        b = dfl.TraceBuilder("outage", 1, origins={"cdn": {}, "backup": {}},
                             retry={"max_attempts": 2, "base_s": 0.5},
                             breaker={"failures": 2, "open_s": 60})
        for i in range(6):
            if mirrors:
                b.artifact(f"a{i}", f"a{i}.pak", "r1", 1_000_000, origins=["cdn", "backup"])
            else:
                b.artifact(f"a{i}", f"a{i}.pak", "r1", 1_000_000, origin="cdn")
        b.fault(0.0, "origin_down", origin="cdn", duration_s=30)
        for i in range(6):
            b.subscribe(0.5 * i, f"d{i}", "game", f"a{i}", 1)
        return b.build()

    with_mirrors, without = outage(True), outage(False)
    assert with_mirrors.to_dict()["artifacts"][0]["origins"] == ["cdn", "backup"]
    assert "origins" not in without.to_dict()["artifacts"][0]
    assert with_mirrors.to_dict()["scheduler"]["breaker_failures"] == 2
    served = dfl.simulate(with_mirrors)
    assert served.summary["outcomes"]["succeeded"] == 6
    # Two failures at cdn open its breaker: the other four go to backup at once.
    assert sorted(served.tasks["attempts"]) == [1, 1, 1, 1, 2, 2]
    down = dfl.simulate(without)
    assert down.summary["outcomes"]["failed"] == 6, "one origin, down for longer than the retries"


def test_throttling_a_prefetch_serves_a_critical_load_sooner():
    def run(throttle):
        b = (dfl.TraceBuilder("throttle", 1, client_bandwidth_Bps=10e6, throttle=throttle)
             .artifact("prefetch", "prefetch.pak", "r1", 20_000_000)
             .artifact("critical", "critical.pak", "r1", 5_000_000)
             .subscribe(0.0, "p", "o", "prefetch", 0)
             .subscribe(0.5, "c", "o", "critical", 3))
        return dfl.simulate(b.build(), network_model="cm02")

    capped = run({"background_at_or_below": 0, "background_Bps": 1e6})
    free = run(None)
    wait = {name: r.demands.set_index("demand").loc["c", "t_end"] - 0.5
            for name, r in (("capped", capped), ("free", free))}
    assert wait["capped"] < 0.7 < 1.0 < wait["free"], wait
    b = dfl.TraceBuilder("t").artifact("a", "a", "r1", 10).throttle(1.0, overall_Bps=5e6)
    record = b.build().to_dict()["records"][0]
    assert (record["op"], record["overall_Bps"], record["background_at_or_below"]) == (
        "throttle", 5e6, None)


def test_the_engine_fails_over_to_a_mirror_and_refuses_bad_origins():
    engine = dfl.Engine(max_transfers=2)
    _, commands = engine.subscribe(0.0, "rock", owner=1, priority=2, origin=0, mirrors=[1],
                                   size_bytes=1000)
    start = [c for c in commands if c["type"] == "start_transfer"][0]
    assert (start["origin"], start["priority"]) == (0, 2)
    commands = engine.transfer_finished(0.1, start["transfer"], "retryable_error", 400)
    again = [c for c in commands if c["type"] == "start_transfer"][0]
    assert (again["origin"], again["resume_offset_bytes"]) == (1, 400), "the mirror, at once"
    assert again["priority"] == 2, "a retry asks at its task's priority too"
    assert engine.stats()["failovers"] == 1
    with pytest.raises(ValueError, match="mirrors"):
        engine.subscribe(0.2, "stone", owner=1, mirrors=[1_000_000])
    with pytest.raises(ValueError, match="mirrors"):
        engine.subscribe(0.2, "stone", owner=1, mirrors=list(range(40)))
    with pytest.raises(ValueError, match="origin"):
        engine.subscribe(0.2, "stone", owner=1, origin=1_000_000)


def test_compare_returns_the_clis_table(scenarios, cli, tmp_path):
    trace = scenarios / "flaky_network.jsonl"
    csv = tmp_path / "c.csv"
    subprocess.run([cli, "compare", str(trace), "--policies", "always-abort,keep-partial",
                    "--csv", str(csv)], check=True, capture_output=True)
    expected = pd.read_csv(csv, na_values=["-"])
    got = dfl.compare(trace, policies=["always-abort", "keep-partial"])
    pd.testing.assert_frame_equal(got, expected)
    assert set(got["policy"]) == {"always-abort", "keep-partial", "oracle"}
    # A Trace object works as well as a path.
    from_object = dfl.compare(dfl.Trace.load(trace), policies=["always-abort", "keep-partial"])
    pd.testing.assert_frame_equal(from_object.drop(columns="trace"), expected.drop(columns="trace"))


class PySquid(dfl.OrphanPolicy):
    """Squid's quick_abort rule, as policies/builtin.h has it."""

    def __init__(self, min_bytes, max_bytes, pct):
        self.min_bytes, self.max_bytes, self.pct = min_bytes, max_bytes, pct

    def decide(self, view):
        if view.size_bytes == 0:
            return dfl.Decision.ABORT
        if view.bytes_remaining <= self.min_bytes:
            return dfl.Decision.COMPLETE
        if view.bytes_remaining > self.max_bytes:
            return dfl.Decision.ABORT
        done = 100.0 * view.bytes_done / view.size_bytes
        return dfl.Decision.COMPLETE if done >= self.pct else dfl.Decision.ABORT


class Raises(dfl.OrphanPolicy):
    name = "raises"

    def decide(self, view):
        raise KeyError("no such thing")


def test_compare_runs_a_python_policy_and_gives_the_builtin_equals_row(scenarios):
    spec = "squid:pct=50,min_bytes=100000,max_bytes=4000000"
    traces = ["gen:session_churn:demands=300", scenarios / "cache_pressure.jsonl"]
    table = dfl.compare(traces, seeds=3, policies=[spec, PySquid(100000, 4000000, 50)])
    assert set(table.policy) == {"always-abort", spec, "PySquid", "oracle"}
    for trace in table.trace.unique():
        rows = table[table.trace == trace].set_index("policy")
        builtin, mine = rows.loc[spec], rows.loc["PySquid"]
        pd.testing.assert_series_equal(builtin, mine, check_names=False)
        # It decided something: not the baseline's row.
        assert builtin["score"] != rows.loc["always-abort", "score"] or \
            builtin["wasted_gb"] != rows.loc["always-abort", "wasted_gb"]
    assert "regret" in table and "vs_oracle" in table and "score_diff_lo" in table

    # One separator for parameters (the old ';' still accepted), a Python baseline.
    old = dfl.compare(traces[0], policies="squid:pct=50;min_bytes=100000;max_bytes=4000000")
    new = dfl.compare(traces[0], policies="always-abort," + spec)
    assert list(old.policy) == list(new.policy) == ["always-abort", spec, "oracle"]
    pd.testing.assert_frame_equal(old, new)
    against_mine = dfl.compare(traces[0], policies=[PySquid(100000, 4000000, 50), spec],
                               baseline="PySquid")
    assert (against_mine.set_index("policy").loc[spec, ["score_diff", "wins"]] == 0).all()

    with pytest.raises(KeyError, match="no such thing"):
        dfl.compare(traces[0], policies=[Raises()])
    with pytest.raises(ValueError, match="policies: 'PySquid'"):
        dfl.compare(traces[0], policies=[PySquid(0, 0, 0), PySquid(1, 1, 1)])
    with pytest.raises(TypeError, match="policies"):
        dfl.compare(traces[0], policies=[42])


def test_cmake_install_puts_a_working_package_into_dist_packages(tmp_path, scenarios):
    import os
    import sys
    build = os.environ.get("DFL_BUILD_DIR")
    if not build:
        pytest.skip("DFL_BUILD_DIR is set by CTest")
    prefix = tmp_path / "prefix"
    subprocess.run([os.environ.get("DFL_CMAKE", "cmake"), "--install", build, "--prefix",
                    str(prefix)], check=True, capture_output=True)
    site = prefix / "lib" / f"python3.{sys.version_info.minor}" / "dist-packages"
    assert (site / "demandflight" / "__init__.py").exists()
    code = ("import demandflight as d, sys; "
            f"r = d.simulate({str(scenarios / 'three_callers.jsonl')!r}); "
            "t = d.compare(" + repr(str(scenarios / "three_callers.jsonl")) +
            ", policies=['always-abort']); "
            "print(d.__file__, r.summary['installs'], len(t))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env=env, cwd=tmp_path).stdout.split()
    assert out[0].startswith(str(site)), "imported from the installed tree"
    assert out[1:] == ["3", "2"]


def run_first_python_block(document, tmp_path, scenarios):
    """Runs the first ```python block of `document` (a path below the repository
    root) from a directory that looks like the root."""
    import os
    import sys
    text = (Path(__file__).resolve().parents[2] / document).read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    if not (tmp_path / "scenarios").exists():
        (tmp_path / "scenarios").symlink_to(scenarios)  # It runs from the repository root.
    (tmp_path / "quick.py").write_text(code)
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "quick.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_the_python_guides_quick_start_works_as_written(tmp_path, scenarios):
    proc = run_first_python_block("docs/python.md", tmp_path, scenarios)
    assert (tmp_path / "wasted.png").stat().st_size > 1000
    assert "keep-partial" in proc.stdout


def test_the_readmes_python_tour_works_as_written(tmp_path, scenarios):
    proc = run_first_python_block("README.md", tmp_path, scenarios)
    assert "succeeded" in proc.stdout


def test_compares_paired_statistics_match_scipy_on_its_own_runs():
    import numpy as np
    from scipy import stats
    table, runs = dfl.compare("gen:session_churn:demands=300", seeds=6, first_seed=40,
                              policies=["always-abort", "keep-partial", "always-complete"],
                              runs=True)
    assert len(runs) == 6 * 4, "one row per policy (and the oracle) and seed"
    base = runs[runs.policy == "always-abort"].sort_values("seed")["score"].to_numpy()
    for policy in ("keep-partial", "always-complete", "oracle"):
        x = runs[runs.policy == policy].sort_values("seed")["score"].to_numpy()
        row = table[table.policy == policy].iloc[0]
        d = x - base
        assert row["score_diff"] == pytest.approx(d.mean(), abs=1e-8)
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
        assert row["score_diff_lo"] == pytest.approx(d.mean() - half, abs=1e-7)
        assert row["score_diff_hi"] == pytest.approx(d.mean() + half, abs=1e-7)
        assert row["score_p_t"] == pytest.approx(stats.ttest_rel(x, base).pvalue, abs=1e-7)
        nonzero = np.abs(d[d != 0])
        if len(np.unique(nonzero)) == len(nonzero) and len(nonzero) == len(d):
            assert row["score_p_wilcoxon"] == pytest.approx(stats.wilcoxon(x, base).pvalue,
                                                            abs=1e-9)
        assert row["wins"] == int((d < 0).sum())
        assert bool(row["significant"]) == (row["score_diff_lo"] > 0 or row["score_diff_hi"] < 0)
    own = table[table.policy == "always-abort"].iloc[0]
    # Against itself every difference is 0: constant, so no interval and no marker.
    assert own["score_diff"] == 0 and np.isnan(own["score_diff_lo"]) and own["constant"]
    assert not own["significant"]
    with pytest.raises(ValueError, match="baseline"):
        dfl.compare("gen:session_churn:demands=300", baseline="sometimes")


def test_a_csv_request_log_imports_as_a_trace_and_bad_rows_name_their_line(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("ts,obj,bytes,user,gone\n100,a,1000,u1,\n100.5,b,2000,u2,101\n"
                   "102,a,1500,u3,\n")
    trace = dfl.Trace.import_csv(log, time="ts", key="obj", size="bytes", owner="user",
                                 end="gone", name="mine", out=tmp_path / "t.jsonl")
    header = json.loads(trace.text.splitlines()[0])
    assert header["name"] == "mine" and header["x-import"]["demands"] == 3
    assert header["x-import"]["size_changes"] == 1 and header["x-import"]["cancels"] == 1
    assert (tmp_path / "t.jsonl").read_text() == trace.text
    result = dfl.simulate(trace)
    assert list(result.demands.owner) == ["u1", "u2", "u3"]
    assert list(result.demands.artifact) == ["a", "b", "a@2"]
    log.write_text("ts,obj,bytes\n1,a,10\n0.5,b,10\n")
    with pytest.raises(dfl.TraceError, match=r"log.csv:3: ts: goes backwards") as e:
        dfl.Trace.import_csv(log, time="ts", key="obj", size="bytes")
    assert e.value.line == 3 and e.value.field == "ts"
    with pytest.raises(ValueError, match="time_unit"):
        dfl.Trace.import_csv(log, time="ts", key="obj", size="bytes", time_unit="hours")
