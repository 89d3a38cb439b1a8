"""dfl.Trace.import_: every format from Python, with the CLI's options by their
Python names, and errors that name the argument."""

import gc
import json
import pickle
from pathlib import Path

import pytest

import demandflight as dfl

HAR = {"log": {"version": "1.2", "creator": {"name": "t", "version": "1"},
               "pages": [{"id": "p1", "startedDateTime": "2026-01-01T00:00:00Z", "title": "x"}],
               "entries": [
                   {"pageref": "p1", "startedDateTime": "2026-01-01T00:00:01.500Z", "time": 30,
                    "_priority": "Low", "_resourceType": "image",
                    "request": {"method": "GET", "url": "https://cdn.example.com/a.png"},
                    "response": {"status": 200, "bodySize": 800, "content": {"size": 1000}}},
                   {"pageref": "p1", "startedDateTime": "2026-01-01T00:00:01.000Z", "time": 10,
                    "_priority": "VeryHigh", "_resourceType": "document",
                    "request": {"method": "GET", "url": "https://example.com/"},
                    "response": {"status": 200, "bodySize": 400, "content": {"size": 2000}}}]}}


def test_a_har_capture_imports_with_options_by_their_python_names(tmp_path):
    path = tmp_path / "page.har"
    path.write_text(json.dumps(HAR))
    trace = dfl.Trace.import_("har", path, size_from="body", priority_by="type",
                              priority_map="document=3,*=0", deadline=5, name="page",
                              out=tmp_path / "page.jsonl")
    assert trace.name == "page" and trace.demands == 2
    assert (tmp_path / "page.jsonl").read_text() == trace.text
    x = trace.header()["x-import"]
    assert x["format"] == "har" and x["entries"] == 2
    assert x["options"]["size-from"] == "body"
    records = [json.loads(line) for line in trace.text.splitlines()[1:]]
    subs = [r for r in records if r["op"] == "subscribe"]
    assert [(s["demand"], s["t"], s["priority"], s["timeout_s"]) for s in subs] == [
        ("e2", 0.0, 3, 5.0), ("e1", 0.5, 0, 5.0)]
    assert [r["size"] for r in records if r["op"] == "artifact"] == [400, 800]
    result = dfl.simulate(trace)
    assert list(result.demands.outcome) == ["succeeded", "succeeded"]


def test_an_import_kept_in_memory_is_the_trace_its_file_holds(tmp_path):
    path = tmp_path / "page.har"
    path.write_text(json.dumps(HAR))
    kept = dfl.Trace.import_("har", path, size_from="body", out=tmp_path / "page.jsonl")
    trace = dfl.Trace.import_("har", path, size_from="body")
    # Its own file is read and parsed when first needed, and goes with the trace.
    assert trace.path is None and trace._file is not None and trace._text_value is None
    own_file = Path(trace._file)
    assert trace == kept and trace.text == kept.text and trace.demands == 2
    assert dfl.simulate(trace).raw == dfl.simulate(kept).raw
    # A copy in another process (pickled) is a trace in memory, the same trace.
    copy = pickle.loads(pickle.dumps(trace))
    assert copy == trace and copy.text == trace.text and copy._file is None
    del trace
    gc.collect()
    assert not own_file.exists()
    assert dfl.simulate(copy).raw == dfl.simulate(kept).raw


def test_the_formats_and_their_options_are_listed():
    assert dfl.import_formats() == ["csv", "oracle-general", "har", "cdp", "access-log"]
    options = dfl.import_options("cdp")
    assert {"owner_by", "cached", "abandon", "sessions", "priority_by"} <= set(options.name)
    assert not options[options.name == "abandon"].required.any()
    csv = dfl.import_options("csv").set_index("name")
    assert csv.loc["time", "required"] and csv.loc["no_header", "flag"]


def test_bad_options_and_inputs_are_named(tmp_path):
    path = tmp_path / "page.har"
    path.write_text(json.dumps(HAR))
    with pytest.raises(TypeError, match="unexpected keyword argument 'owner_column'"):
        dfl.Trace.import_("har", path, owner_column="x")
    with pytest.raises(ValueError, match=r"^size_from: \"bytes\" is not content or body"):
        dfl.Trace.import_("har", path, size_from="bytes")
    with pytest.raises(ValueError, match=r"abandon: dist=lognormal needs median_s"):
        dfl.Trace.import_("har", path, abandon="p=0.5,dist=lognormal")
    with pytest.raises(ValueError, match="format must be one of"):
        dfl.Trace.import_("pcap", path)
    bad = json.loads(json.dumps(HAR))
    bad["log"]["entries"][1]["_priority"] = "Urgent"
    path.write_text(json.dumps(bad, indent=1))
    with pytest.raises(dfl.TraceError, match=r"_priority: \"Urgent\"") as e:
        dfl.Trace.import_("har", path, out=tmp_path / "never.jsonl")
    assert e.value.field == "log.entries[1]._priority" and e.value.line > 1
    assert not (tmp_path / "never.jsonl").exists(), "nothing written"
    assert not list(tmp_path.glob("never.jsonl*"))


def test_oracle_general_records_import_from_python(tmp_path):
    import struct
    path = tmp_path / "t.oracleGeneral"
    path.write_bytes(b"".join(struct.pack("<IQIq", t, obj, size, -1)
                              for t, obj, size in [(10, 1, 500), (11, 2, 700), (13, 1, 500)]))
    trace = dfl.Trace.import_("oracle-general", path, abandon="p=1,dist=fixed,after_s=0.25")
    records = [json.loads(line) for line in trace.text.splitlines()[1:]]
    cancels = [(r["t"], r["demand"]) for r in records if r["op"] == "cancel"]
    assert cancels == [(0.25, "r1"), (1.25, "r2"), (3.25, "r3")]
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(dfl.TraceError, match=r"record 3: -: truncated: 21 of its 24 bytes"):
        dfl.Trace.import_("oracle-general", path)


def docs_section(title):
    """The text of docs/cli.md's section `### title`, to its next `###`."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    return docs.split(f"### {title}\n", 1)[1].split("\n### ", 1)[0]


def run_docs_example(title, cli, scenarios, tmp_path):
    """The first ```sh block of docs/cli.md's section `title`, run word for word but
    for the paths (the build's CLI, the scenarios and scripts of this checkout) in
    tmp_path; returns the section's text and what the block printed."""
    import subprocess
    root = Path(__file__).resolve().parents[2]
    section = docs_section(title)
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    script = block.replace("build/release/cli/demandflight", cli).replace(
        "scenarios/", str(scenarios) + "/").replace("scripts/", str(root / "scripts") + "/")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return section, proc.stdout


def test_the_access_log_worked_example_of_the_docs_runs_and_says_its_counts(cli, scenarios,
                                                                           tmp_path):
    """docs/cli.md's access-log example, word for word but for the paths, and
    the x-import counts its table states."""
    section, out = run_docs_example("An access log: imported, described and compared", cli,
                                    scenarios, tmp_path)
    assert "keep-partial" in out and "orphan opportunity" in out
    x = json.loads((tmp_path / "access.jsonl").open().readline())["x-import"]
    for name in ("lines", "demands", "artifacts", "cancels", "abandoned_by_status", "cut_short"):
        assert f"| `{name}` | {x[name]:,} |" in section, (name, x[name])
    for why, n in x["skipped"].items():
        assert f"| {why} | {n:,} |" in section, (why, n)


def test_the_unknown_sizes_worked_example_of_the_docs_runs_and_says_its_counts(cli, scenarios,
                                                                              tmp_path):
    """docs/cli.md's capture with unknown sizes, word for word but for the paths: the
    sizes Chrome called -1 come from Content-Length, the records are those of the full
    capture, and the counts the prose states are the import's."""
    import re
    section, out = run_docs_example("A capture with unknown sizes", cli, scenarios, tmp_path)
    assert "the same records" in out and "keep-partial" in out
    x = json.loads((tmp_path / "old-chrome.jsonl").open().readline())["x-import"]
    unknown = x["sizes_unknown_taken_from_content_length"]
    assert unknown > 0 and f"-1 on 8% of those\nevents ({unknown} of 233" in section
    assert f'"sizes_unknown_taken_from_content_length":{unknown}' in section
    assert x["sizes_unknown_taken_from_data_received"] == 0
    assert x["skipped"] == {"cancel of a skipped request": 3,
                            "cancelled before its size was known": 3}
    assert x["requests"] == x["demands"] + 3
    # The comparison's figure the prose quotes is the one printed.
    line = next(l for l in out.splitlines() if l.startswith("always-complete"))
    quoted = re.search(r"always-complete scores (\S+ \[\S+, \S+\])", section).group(1)
    assert quoted.replace("−", "-").lstrip("+") in line, (quoted, line)


def test_the_worked_examples_of_the_docs_are_described_as_their_table_says(cli, scenarios,
                                                                         tmp_path):
    """docs/cli.md's worked imports, word for word but for the paths, described: the
    single-flight and orphan rows of its table are what describe says of each."""
    import subprocess
    run_docs_example("Worked examples", cli, scenarios, tmp_path)
    section = docs_section("The imported workloads described and compared")
    single, orphans = [], []
    for name in ("har", "cdp", "csv", "oracle"):
        subprocess.run([cli, "describe", f"{name}.jsonl", "--json", f"{name}.json"],
                       cwd=tmp_path, check=True, capture_output=True)
        d = json.loads((tmp_path / f"{name}.json").read_text())
        s, o = d["single_flight"], d["orphans"]
        single.append(f"{s['overlapping_requests']:,} ({100 * s['share']:.1f}%)")
        in_flight = o["cancelled_in_flight"] + o["owner_ended_in_flight"]
        orphans.append(f"{in_flight:,} ({100 * o['share']:.1f}%), {o['came_back']:,} came back")
    row = next(l for l in section.splitlines() if l.startswith("| single flight:"))
    assert [c.strip().split("%)")[0] + "%)" for c in row.strip("|").split("|")[1:]] == single, row
    row = next(l for l in section.splitlines() if l.startswith("| orphan opportunity:"))
    assert [c.strip() for c in row.strip("|").split("|")[1:]] == orphans, row
