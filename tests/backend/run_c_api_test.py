#!/usr/bin/env python3
"""Runs tests/backend/c_api_test.c's program against the loopback server: a.bin
served whole, b.bin held after 100,000 of its 200,000 bytes (the program pauses,
resumes and cancels it there). Usage: run_c_api_test.py PROGRAM LOOPBACK_SERVER"""
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path


def main() -> int:
    program, server_py = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        www = Path(tmp) / "www"
        www.mkdir()
        for name in ("a.bin", "b.bin"):
            (www / name).write_bytes(name.encode() * 40_000)  # 200,000 bytes.
        server = subprocess.Popen([sys.executable, server_py, "--root", str(www)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            base = f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}"
            hold = [{"path": "/b.bin", "kind": "hold", "after_bytes": 100_000}]
            urllib.request.urlopen(urllib.request.Request(
                base + "/_control/faults", data=json.dumps(hold).encode(),
                headers={"Content-Type": "application/json"}), timeout=10).read()
            run = subprocess.run([program, base + "/{resource}", str(Path(tmp) / "cache")],
                                 capture_output=True, text=True, timeout=120)
        finally:
            server.kill()
            server.wait()
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
