"""demandflight report and dfl.report: one self-contained HTML page with every
figure, that a real headless browser renders."""

import re
import shutil
import subprocess

import pytest

import demandflight as dfl


def figures(page: str) -> int:
    return len(re.findall(r"<figure><svg", page))


def self_contained(page: str) -> None:
    """No script and nothing fetched: no src, no link, no href to the network."""
    assert "<script" not in page and "<link" not in page and "<img" not in page
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", page)


@pytest.fixture(scope="module")
def inputs(cli, scenarios, tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    subprocess.run([cli, "sim", str(scenarios / "three_callers.jsonl"), "--out",
                    str(d / "run.json"), "--quiet"], check=True)
    subprocess.run([cli, "compare", "gen:session_churn:demands=150", "--policies",
                    "keep-partial", "--seeds", "3", "--csv", str(d / "c.csv"), "--runs-csv",
                    str(d / "runs.csv")], check=True, capture_output=True)
    return d


def test_the_command_writes_a_page_with_every_figure(cli, inputs, tmp_path):
    out = tmp_path / "report.html"
    proc = subprocess.run([cli, "report", str(inputs / "c.csv"), str(inputs / "runs.csv"),
                           str(inputs / "run.json"), "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    self_contained(page)
    # compare --csv: the paired differences, the service rates and wasted GB;
    # --runs-csv: each run's score; the run: its latency ECDF, its outcomes and
    # bytes, and its busiest tasks' priority timeline (three_callers changes them).
    assert figures(page) == 2 + 1 + 3
    assert "score difference to the baseline" in page
    assert "Latency ECDF by subscribe priority" in page
    assert "priority changes" in page
    assert page.count("keep-partial") >= 2


def test_dfl_report_draws_the_same_from_python_objects(scenarios, tmp_path):
    run = dfl.simulate(scenarios / "three_callers.jsonl")
    table = dfl.compare("gen:session_churn:demands=150", policies=["keep-partial"], seeds=2)
    path = dfl.report([table, run], tmp_path / "r.html", title="two inputs")
    page = path.read_text()
    self_contained(page)
    assert figures(page) == 2 + 3
    assert "<title>two inputs</title>" in page


def test_bad_inputs_are_named(cli, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    proc = subprocess.run([cli, "report", str(text), "-o", str(tmp_path / "r.html")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert str(text) in proc.stderr and "not compare --csv or --runs-csv" in proc.stderr
    assert not (tmp_path / "r.html").exists()
    with pytest.raises(ValueError, match="notes.txt"):
        dfl.report(text, tmp_path / "r.html")
    with pytest.raises(TypeError, match="inputs"):
        dfl.report([42], tmp_path / "r.html")
    missing = subprocess.run([cli, "report", str(tmp_path / "nope.json"), "-o",
                              str(tmp_path / "r.html")], capture_output=True, text=True)
    assert missing.returncode == 2 and "nope.json" in missing.stderr


def test_a_headless_browser_renders_the_page(cli, inputs, tmp_path):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/install-deps installs it)")
    out = tmp_path / "report.html"
    subprocess.run([cli, "report", str(inputs / "c.csv"), str(inputs / "run.json"), "-o",
                    str(out)], check=True, capture_output=True)
    shot = tmp_path / "shot.png"
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--window-size=1000,3000",
                           f"--screenshot={shot}", out.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and shot.exists(), proc.stderr
    import matplotlib.image
    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] == 3000 and pixels.shape[1] == 1000
    # Drawn, not blank: the figures' rows differ from the white page, down the
    # page as far as the last figure.
    ink = (pixels[:, :, :3] < 0.9).any(axis=2).any(axis=1)
    assert ink.sum() > 500, "the page rendered next to nothing"
    assert ink[1500:].any(), "the later figures are missing"
