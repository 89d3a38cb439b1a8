#!/usr/bin/env python3
"""Runs the libFuzzer targets for a while each, from corpora seeded with scenarios/.

usage: run.py BUILD_DIR SECONDS

The trace fuzzer's seeds are the bundled scenarios, their first lines (a
header alone, a header and the artifacts, ...) and a few broken variants; the
engine fuzzer's are the same bytes (any bytes are a valid choice sequence).
The import fuzzer's are the bundled inputs of scenarios/imports/, whole and
cut. Corpora are kept in BUILD_DIR/fuzz-corpus/ between runs. Prints executions,
coverage and corpus size per target; exits non-zero if a target found a crash
(its reproducer is in BUILD_DIR/fuzz-artifacts/).
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def seed(corpus: Path) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    for scenario in sorted((ROOT / "scenarios").glob("*.jsonl")):
        lines = scenario.read_text().splitlines(keepends=True)
        for n in (1, 2, 5, 20, 80):
            (corpus / f"{scenario.stem}-{n}.jsonl").write_text("".join(lines[:n]))
        if len(lines) <= 400:
            (corpus / f"{scenario.stem}.jsonl").write_text("".join(lines))
        (corpus / f"{scenario.stem}-cut.jsonl").write_text("".join(lines[:10])[:-7])


def seed_imports(corpus: Path) -> None:
    """The bundled import inputs, each behind the byte that picks its format, whole
    or cut (a cut JSON document is bad input too), and a few small ones."""
    corpus.mkdir(parents=True, exist_ok=True)
    formats = {"cdn_log.csv": 0, "cdn_log.oracleGeneral.zst": 1, "browse.har": 2,
               "browse.cdp.json": 3}
    for name, number in formats.items():
        data = (ROOT / "scenarios" / "imports" / name).read_bytes()
        for cut in (300, 3000, 16000):
            for model in (0, 4):
                (corpus / f"{name}-{cut}-{model}").write_bytes(bytes([number | model]) + data[:cut])
    (corpus / "csv-small").write_bytes(b"\x00" + b"1,a,10,u,\n2,b,20,v,2.5\n2,a,10,u,\n")
    (corpus / "oracle-small").write_bytes(b"\x01" + bytes(24) + bytes([1] + [0] * 23))


def run(binary: Path, corpus: Path, artifacts: Path, seconds: int, max_len: int) -> int:
    artifacts.mkdir(parents=True, exist_ok=True)
    cmd = [str(binary), str(corpus), f"-max_total_time={seconds}", "-timeout=10",
           "-rss_limit_mb=2048", f"-max_len={max_len}", "-print_final_stats=1",
           f"-artifact_prefix={artifacts}/", "-close_fd_mask=1"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stderr
    runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
    cov = re.findall(r"#\d+\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)", log)
    crashes = re.findall(r"(==\d+==ERROR.*|SUMMARY: .*|Test unit written to .*)", log)
    last = cov[-1] if cov else ("?", "?", "?")
    print(f"{binary.name}: {runs[-1] if runs else '?'} executions in {seconds} s, "
          f"coverage {last[0]} edges / {last[1]} features, corpus {last[2]} inputs, "
          f"exit {proc.returncode}")
    if proc.returncode != 0:
        print("\n".join(crashes) or log[-3000:])
    return proc.returncode


def main() -> int:
    build, seconds = Path(sys.argv[1]), int(sys.argv[2])
    status = 0
    for name, max_len in (("trace_fuzz", 65536), ("engine_fuzz", 4096), ("import_fuzz", 16384)):
        corpus = build / "fuzz-corpus" / name
        seed_imports(corpus) if name == "import_fuzz" else seed(corpus)
        status |= run(build / "tests" / "fuzz" / name, corpus, build / "fuzz-artifacts", seconds,
                      max_len)
    return 1 if status else 0


if __name__ == "__main__":
    sys.exit(main())
