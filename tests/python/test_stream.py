"""dfl.simulate(..., stream=True) and dfl.read_rows: a trace run as `demandflight sim
--stream` runs it gives the in-memory run's summary and rows; rows are read in chunks
from the CSV files and from a result JSON; what a streamed run cannot do is refused,
naming the argument."""

import json
import subprocess

import pandas as pd
import pytest

import demandflight as dfl
from demandflight import _core, _simulate

COLUMNS = ["demand", "owner", "artifact", "priority", "t_subscribe", "t_end", "latency_s",
           "outcome", "task", "served_by"]
TASK_COLUMNS = ["artifact", "t_start", "t_first_start", "t_received", "t_end", "outcome",
                "attempts", "bytes_transferred", "installs"]


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("stream") / "churn.jsonl"
    path.write_text(_core.generate_trace("gen:session_churn:demands=3000", 11))
    return path


@pytest.fixture(scope="module")
def result_json(trace_path, cli, tmp_path_factory):
    """The result JSON of a streamed run of the trace, as `demandflight sim` writes it."""
    out = tmp_path_factory.mktemp("result") / "result.json"
    subprocess.run([cli, "sim", str(trace_path), "--quiet", "--stream", "--out", str(out)],
                   check=True)
    return out


def relaid(result_json, path, **dumps):
    """`path`, holding the result JSON's document written anew by json.dumps(**dumps)."""
    with open(result_json, encoding="utf-8") as f:
        path.write_text(json.dumps(json.load(f), **dumps))
    return path


def same_rows(got: pd.DataFrame, want: pd.DataFrame, columns) -> None:
    assert len(got) == len(want)
    for column in columns:
        a, b = got[column], want[column]
        if pd.api.types.is_numeric_dtype(b) or b.isna().all():
            pd.testing.assert_series_equal(a.astype(float), b.astype(float),
                                           check_names=False)
        else:
            assert list(a.where(a.notna(), None)) == list(b.where(b.notna(), None)), column


def test_a_streamed_run_gives_the_in_memory_result(trace_path, tmp_path):
    whole = dfl.simulate(str(trace_path), policy="keep-partial")
    streamed = dfl.simulate(str(trace_path), policy="keep-partial", stream=True,
                            rows_dir=tmp_path / "rows")
    assert streamed.streamed and not whole.streamed
    assert streamed.summary == whole.summary
    assert (tmp_path / "rows" / "demands.csv.gz").exists()
    same_rows(streamed.demands, whole.demands, COLUMNS)
    same_rows(streamed.tasks, whole.tasks, TASK_COLUMNS)
    assert whole.summary["outcomes"]["cancelled"] + whole.summary["outcomes"]["owner_ended"] > 0
    # In chunks: every row once, in order.
    chunks = list(streamed.demand_chunks(chunksize=700))
    assert len(chunks) == -(-len(whole.demands) // 700)
    assert all(len(c) <= 700 for c in chunks)
    same_rows(pd.concat(chunks, ignore_index=True), whole.demands, COLUMNS)
    assert "demands" in repr(streamed)


def test_read_rows_reads_a_result_json_and_csv_files_in_chunks(trace_path, tmp_path, cli):
    out = tmp_path / "result.json"
    subprocess.run([cli, "sim", str(trace_path), "--quiet", "--stream", "--out", str(out),
                    "--demands-csv", str(tmp_path / "d.csv"), "--tasks-csv",
                    str(tmp_path / "t.csv.gz")], check=True)
    loaded = dfl.Result.load(out)
    json_chunks = list(dfl.read_rows(out, chunksize=1000))
    assert len(json_chunks) == 3
    same_rows(pd.concat(json_chunks, ignore_index=True), loaded.demands, COLUMNS)
    tasks = pd.concat(dfl.read_rows(out, section="tasks", chunksize=500), ignore_index=True)
    assert list(tasks["priority_timeline"]) == list(loaded.tasks["priority_timeline"])
    same_rows(pd.concat(dfl.read_rows(tmp_path / "d.csv", chunksize=999)), loaded.demands,
              COLUMNS)
    csv_tasks = pd.concat(dfl.read_rows(tmp_path / "t.csv.gz"), ignore_index=True)
    assert list(csv_tasks["task"]) == list(range(len(loaded.tasks)))
    same_rows(csv_tasks, loaded.tasks, ["artifact", "t_end", "outcome", "bytes_transferred"])


def test_read_rows_reads_a_result_json_whatever_its_line_breaks(result_json, tmp_path,
                                                                monkeypatch):
    loaded = dfl.Result.load(result_json)
    one_line = relaid(result_json, tmp_path / "one_line.json")
    indented = relaid(result_json, tmp_path / "indented.json", indent=2)
    assert len(one_line.read_text().splitlines()) == 1
    demands = pd.concat(dfl.read_rows(result_json), ignore_index=True)
    tasks = pd.concat(dfl.read_rows(result_json, section="tasks"), ignore_index=True)
    same_rows(demands, loaded.demands, COLUMNS)
    same_rows(tasks, loaded.tasks, TASK_COLUMNS)
    for column in ("priority_timeline", "orphan_decisions"):
        assert list(tasks[column]) == list(loaded.tasks[column])
    for path in (one_line, indented):
        pd.testing.assert_frame_equal(pd.concat(dfl.read_rows(path), ignore_index=True),
                                      demands)
        pd.testing.assert_frame_equal(
            pd.concat(dfl.read_rows(path, section="tasks"), ignore_index=True), tasks)
    # Blocks shorter than a row: values are cut by a block's end everywhere.
    monkeypatch.setattr(_simulate, "_JSON_BLOCK_CHARS", 61)
    pd.testing.assert_frame_equal(
        pd.concat(dfl.read_rows(indented, section="tasks"), ignore_index=True), tasks)


def test_read_rows_chunks_a_result_json_on_one_line(result_json, tmp_path):
    loaded = dfl.Result.load(result_json)
    one_line = relaid(result_json, tmp_path / "one_line.json")
    chunks = list(dfl.read_rows(one_line, chunksize=700))
    assert len(chunks) == -(-len(loaded.demands) // 700) > 1
    assert all(len(c) <= 700 for c in chunks)
    same_rows(pd.concat(chunks, ignore_index=True), loaded.demands, COLUMNS)
    size = len(loaded.tasks) // 3 + 1
    task_chunks = list(dfl.read_rows(one_line, section="tasks", chunksize=size))
    assert [len(c) for c in task_chunks] == [size, size, len(loaded.tasks) - 2 * size]
    same_rows(pd.concat(task_chunks, ignore_index=True), loaded.tasks, TASK_COLUMNS)


def test_bad_json_in_a_result_is_named_by_file_and_line(result_json, tmp_path):
    text = relaid(result_json, tmp_path / "one_line.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[:text.index('"tasks"') // 2])  # Within the demand rows.
    with pytest.raises(ValueError, match=r"cut\.json:1: not valid JSON"):
        list(dfl.read_rows(cut))
    with pytest.raises(ValueError, match=r"cut\.json:1: not valid JSON"):
        list(dfl.read_rows(cut, section="tasks"))
    lines = relaid(result_json, tmp_path / "indented.json", indent=2).read_text().splitlines()
    at = lines.index('  "tasks": [') // 2
    lines.insert(at, "@")
    bad = tmp_path / "bad.json"
    bad.write_text("\n".join(lines))
    with pytest.raises(ValueError, match=rf"bad\.json:{at + 1}: not valid JSON"):
        list(dfl.read_rows(bad))


def test_a_json_document_of_another_format_is_not_read(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something-else", "demands": []}, indent=2))
    with pytest.raises(ValueError, match=r"other\.json:2: format: not a demandflight result"):
        next(dfl.read_rows(other))
    other.write_text(json.dumps({"demands": [{"demand": "d1"}]}))
    with pytest.raises(ValueError, match=r"other\.json:1: format: .*no \"format\""):
        next(dfl.read_rows(other))
    other.write_text(json.dumps([{"format": "demandflight-result"}]))
    with pytest.raises(ValueError, match=r"other\.json:1: format: .*not a JSON object"):
        next(dfl.read_rows(other))
    other.write_text(json.dumps({"format": "demandflight-result", "tasks": []}))
    with pytest.raises(ValueError, match=r"other\.json: demands: missing"):
        next(dfl.read_rows(other))


def test_what_a_streamed_run_cannot_do_is_refused_by_name(trace_path, tmp_path):
    with pytest.raises(ValueError, match="decisions"):
        dfl.simulate(str(trace_path), stream=True, decisions=True)
    with pytest.raises(ValueError, match="resample"):
        dfl.simulate(str(trace_path), stream=True, resample="owners")
    with pytest.raises(ValueError, match="cache_bytes"):
        dfl.simulate(str(trace_path), stream=True, cache_bytes=10)
    with pytest.raises(ValueError, match="policy"):
        dfl.simulate(str(trace_path), stream=True, policy="oracle")
    with pytest.raises(ValueError, match="policy: lookahead"):
        dfl.simulate(str(trace_path), stream=True, policy="lookahead:horizon_s=5")
    with pytest.raises(ValueError, match="max_transfers"):
        dfl.simulate(str(trace_path), stream=True, max_transfers=0)
    # The range and the names are the simulator's own (_core), not a copy.
    with pytest.raises(ValueError, match="from 1 to 100000"):
        dfl.simulate(str(trace_path), stream=True, max_per_origin=100_001)
    with pytest.raises(ValueError, match="default, tcp, calibrated, cm02, lv08, ns3, not 'ns4'"):
        dfl.simulate(str(trace_path), stream=True, network_model="ns4")
    with pytest.raises(ValueError, match="rows_dir"):
        dfl.simulate(str(trace_path), rows_dir=tmp_path)
    with pytest.raises(TypeError, match="stream"):
        dfl.simulate(str(trace_path), stream="yes")
    with pytest.raises(FileNotFoundError, match="trace"):
        dfl.simulate(str(tmp_path / "missing.jsonl"), stream=True)
    with pytest.raises(ValueError, match="chunksize"):
        next(dfl.read_rows(tmp_path / "x.csv", chunksize=0))
    bad = tmp_path / "bad.json"
    bad.write_text('{"format":"something-else"}\n')
    with pytest.raises(ValueError, match="bad.json:1: format"):
        next(dfl.read_rows(bad))


def test_a_bad_line_is_a_trace_error_with_its_line(trace_path, tmp_path):
    lines = trace_path.read_text().splitlines()
    lines.insert(len(lines) // 2, '{"op":"cancel","t":1e9,"demand":"nobody"}')
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(dfl.TraceError) as e:
        dfl.simulate(str(bad), stream=True, rows_dir=tmp_path / "rows")
    assert e.value.line == len(lines) // 2 + 1
    assert e.value.field == "demand"


class CountingPolicy(dfl.OrphanPolicy):
    """Completes every orphan, and says how many it saw."""
    name = "counting"

    def __init__(self):
        super().__init__()
        self.decisions = 0

    def decide(self, view):
        self.decisions += 1
        return "complete"

    def report(self):
        return {"decisions": self.decisions}


def test_a_python_policy_runs_streamed_and_reports(trace_path):
    whole = dfl.simulate(str(trace_path), policy=CountingPolicy())
    streamed = dfl.simulate(str(trace_path), policy=CountingPolicy(), stream=True)
    assert streamed.summary == whole.summary
    assert streamed.policy_report == whole.policy_report
    assert streamed.policy_report["decisions"] > 0
