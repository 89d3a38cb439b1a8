"""A client's recording (docs/backend.md, *Recording*): from Python, a rotated set read
as one trace, described, compared and reported like any other, and what it measured as
a DataFrame; `replay --record` of each bundled scenario gives back its calls; the
docs' loop (record, check, choose, deploy, check) word for word. Recordings of the
scenarios are made against a port nothing listens on (every attempt is refused: the
calls are what is recorded, and they do not depend on what an origin answers)."""

import collections
import contextlib
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

import demandflight as dfl
from conftest import loopback_server

ROOT = Path(__file__).resolve().parents[2]


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def workload(path: Path, demands: int) -> None:
    lines = [json.dumps({"format": "demandflight-trace", "version": 1, "name": "workload",
                         "scheduler": {"retry": {"max_attempts": 1}}})]
    for a in range(10):
        lines.append(json.dumps({"op": "artifact", "id": f"a{a}", "resource": f"asset-{a}.bin",
                                 "revision": "r1", "target": "pc", "generation": 0,
                                 "size": 100_000, "origin": "cdn"}))
    for d in range(demands):
        lines.append(json.dumps({"op": "subscribe", "t": d * 0.01, "demand": f"d{d}",
                                 "owner": f"o{d % 3}", "artifact": f"a{d % 10}",
                                 "priority": d % 4}))
        if d % 7 == 3:
            lines.append(json.dumps({"op": "cancel", "t": d * 0.01, "demand": f"d{d}"}))
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def recording(tmp_path_factory, cli) -> Path:
    work = tmp_path_factory.mktemp("recording")
    workload(work / "workload.jsonl", 60)
    run = subprocess.run(
        [cli, "replay", str(work / "workload.jsonl"), "--base-url",
         f"http://127.0.0.1:{dead_port()}", "--cache", str(work / "cache"), "--record",
         str(work / "rec.jsonl"), "--record-rotate", "6000", "--record-outcomes", "--quiet"],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return work / "rec.jsonl"


def test_a_rotated_recording_reads_as_one_trace(recording):
    parts = dfl._trace.recording_parts(recording)
    assert len(parts) >= 2, parts
    assert [Path(p).name for p in parts[:2]] == ["rec.jsonl", "rec.1.jsonl"]
    trace = dfl.Trace.load_recording(recording)
    assert trace.demands == 60
    assert trace == dfl.Trace.load(parts)
    # The first part alone holds fewer demands: the set is what holds them all.
    assert dfl.Trace.load(parts[0]).demands < 60
    assert trace.header()["x-recording"]["part"] == 0


def test_a_recording_is_described_compared_and_reported_like_any_trace(recording, tmp_path):
    trace = dfl.Trace.load_recording(recording)
    description = dfl.describe(trace)
    assert description.raw["counts"]["requests"] == 60
    assert description.raw["counts"]["cancels"] == len([d for d in range(60) if d % 7 == 3])
    table = dfl.compare([trace], policies=["always-abort", "always-complete"], seeds=1)
    assert {"always-abort", "always-complete"} <= set(table["policy"])
    page = dfl.report([dfl.simulate(trace), table], tmp_path / "report.html").read_text()
    assert "Run: workload" in page and "Comparison: " in page


def test_what_a_recording_measured_is_a_data_frame(recording):
    frame = dfl.Trace.load_recording(recording).measured
    assert list(frame.columns) == ["figure", "origin", "value", "samples"]
    finalize = frame[frame.figure == "finalize_Bps"]
    assert len(finalize) == 1 and finalize.samples.iloc[0] == 0  # Nothing was received.
    assert dfl.Trace.load(Path(__file__).parents[2] / "scenarios" / "three_callers.jsonl").measured.empty


def test_loading_parts_names_the_bad_argument(tmp_path, recording):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="path: .*empty"):
        dfl.Trace.load([recording, empty])
    with pytest.raises(FileNotFoundError, match="path: no such recording"):
        dfl.Trace.load_recording(tmp_path / "missing.jsonl")


@contextlib.contextmanager
def loopback_origin(trace: Path, www: Path):
    """The backend tests' loopback server serving a sparse file for each artifact of
    `trace`; yields its URL."""
    for line in trace.read_text().splitlines():
        record = json.loads(line)
        if record.get("op") == "artifact":
            path = www / record["resource"]
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                f.truncate(record["size"])
    with loopback_server(www) as url:
        yield url


SPEED = 100  # The scenarios run for minutes on their own clock.
# The replay's lateness bound: it sleeps until each call's time; unloaded, the
# latest of 8,146 calls is 4 ms late, and CI runs two tests at once.
LATE_S = 0.1


def timed_records(path: Path):
    """A trace's header, its calls (everything but artifacts and faults) and its artifacts."""
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    calls = [r for r in lines[1:] if r["op"] not in ("artifact", "fault")]
    artifacts = {r["id"]: r for r in lines[1:] if r["op"] == "artifact"}
    return lines[0], calls, artifacts


@pytest.mark.parametrize("name", ["three_callers", "session_churn", "open_world_streaming",
                                  "cache_pressure", "flaky_network"])
def test_replay_record_of_each_bundled_scenario_gives_back_its_stream(tmp_path, cli, scenarios,
                                                                      name):
    """Each bundled scenario replayed at SPEED and recorded: the same calls in the same
    order with the same arguments, demands, owners and artifacts mapped one to one, each
    at its trace time (divided by SPEED) within LATE_S, while the loopback server serves
    its artifacts (75 MB to 5 GB fetched, verified and installed as it records)."""
    scenario = scenarios / f"{name}.jsonl"
    with loopback_origin(scenario, tmp_path / "www") as origin:
        run = subprocess.run(
            [cli, "replay", str(scenario), "--base-url", f"{origin}/{{resource}}", "--cache",
             str(tmp_path / "cache"), "--speed", str(SPEED), "--record",
             str(tmp_path / "rec.jsonl"), "--record-outcomes", "--quiet"],
            capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    # Served: no demand failed, and bytes came from the origin (a refused one fails them).
    header, *rows = [r.split(",") for r in
                     (tmp_path / "rec.demands.csv").read_text().splitlines()]
    ends = collections.Counter((r[header.index("outcome")], r[header.index("served_by")])
                               for r in rows)
    assert not any(o == "failed" for o, _ in ends) and ends["succeeded", "transfer"] > 0, ends
    _, given, given_artifacts = timed_records(scenario)
    _, recorded, recorded_artifacts = timed_records(tmp_path / "rec.jsonl")
    assert [r["op"] for r in recorded] == [g["op"] for g in given]
    demand_of, owner_of, artifact_of = {}, {}, {}  # The trace's id -> the recording's.

    def same(mapping, given_id, recorded_id, what):
        assert mapping.setdefault(given_id, recorded_id) == recorded_id, (what, given_id)

    offset = recorded[0]["t"] - given[0]["t"] / SPEED
    late = []
    for g, r in zip(given, recorded):
        if abs(r["t"] - offset - g["t"] / SPEED) > LATE_S:
            late.append((g, r["t"] - offset))
        if "demand" in g:
            same(demand_of, g["demand"], r["demand"], "demand")
        if "owner" in g:
            same(owner_of, g["owner"], r["owner"], "owner")
        if g.get("owner_generation") is not None or r.get("owner_generation"):
            assert r.get("owner_generation", 0) == g.get("owner_generation", 0), (g, r)
        if g["op"] == "subscribe":
            same(artifact_of, g["artifact"], r["artifact"], "artifact")
            assert r["priority"] == g.get("priority", 0), (g, r)
            # The replay sets the deadline at the trace's timeout (over SPEED) from
            # its own reading of the clock; the recording's is from the core's, which
            # comes after it (the client's lock between them).
            assert ("timeout_s" in r) == ("timeout_s" in g), (g, r)
            if "timeout_s" in g:
                assert g["timeout_s"] / SPEED - LATE_S <= r["timeout_s"] <= \
                    g["timeout_s"] / SPEED + 1e-6, (g, r)
            given_artifact = given_artifacts[g["artifact"]]
            recorded_artifact = recorded_artifacts[r["artifact"]]
            for field in ("resource", "revision", "target", "size"):
                assert recorded_artifact.get(field) == given_artifact.get(field), (field, g, r)
        if g["op"] == "set_priority":
            assert r["priority"] == g["priority"], (g, r)
    assert not late, f"{len(late)} calls more than {LATE_S} s off their time, first {late[0]}"
    # One to one: two of the trace's demands or owners are never one recorded.
    assert len(set(demand_of.values())) == len(demand_of)
    assert len(set(owner_of.values())) == len(owner_of)


def test_the_loop_of_the_docs_runs_word_for_word(tmp_path, cli, scenarios):
    """docs/backend.md's loop (record, check the simulator on that run, choose a policy on
    the recording, deploy it, record and check again), its block run word for word but for
    the paths, against a loopback origin serving the scenario's artifacts."""
    docs = (ROOT / "docs" / "backend.md").read_text()
    section = docs.split("## The loop: record, choose, deploy, check\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    script = block.replace("build/release/cli/demandflight", cli).replace(
        "scenarios/", str(scenarios) + "/")
    with loopback_origin(scenarios / "three_callers.jsonl", tmp_path / "www") as origin:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600,
                              env={**os.environ, "ORIGIN": origin})
    assert proc.returncode == 0, proc.stderr
    # Both runs recorded, each with its rows, each checked: every outcome as simulated.
    for rec in ("rec", "rec2"):
        assert (tmp_path / f"{rec}.demands.csv").exists()
    assert proc.stdout.count("outcomes identical  5 of 5 (100.0%)") == 2, proc.stdout
    assert "keep-partial" in proc.stdout and "d_score" in proc.stdout
    assert json.loads((tmp_path / "rec2.jsonl").open().readline())["x-recording"][
        "orphan_policy"] == "keep-partial"
