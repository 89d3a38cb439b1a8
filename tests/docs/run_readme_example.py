#!/usr/bin/env python3
"""The README's C++ example, built, run against the backend tests' loopback server:
it fetches maps/forest.pak (1 MiB of zeros, the digest the example states), prints
where it is installed and exits 0; served other bytes, it names the mismatch and
exits 1. Usage: run_readme_example.py EXAMPLE LOOPBACK_SERVER"""
import subprocess
import sys
import tempfile
from pathlib import Path

SIZE = 1_048_576


def run(example: str, server_py: str, body: bytes, work: Path) -> subprocess.CompletedProcess:
    www = work / "www"
    path = www / "r42" / "pc" / "maps" / "forest.pak"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    server = subprocess.Popen([sys.executable, server_py, "--root", str(www)],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline().split()[1])
        return subprocess.run(
            [example, f"http://127.0.0.1:{port}/{{revision}}/{{target}}/{{resource}}",
             str(work / "cache")], capture_output=True, text=True, timeout=60)
    finally:
        server.kill()
        server.wait()


def main() -> int:
    example, server_py = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        good = run(example, server_py, bytes(SIZE), Path(tmp) / "good")
        assert good.returncode == 0, good.stderr
        installed = Path(good.stdout.strip())
        assert installed.is_file() and installed.stat().st_size == SIZE, good.stdout
        assert str(installed).startswith(str(Path(tmp) / "good" / "cache")), installed
        bad = run(example, server_py, b"\1" * SIZE, Path(tmp) / "bad")
        assert bad.returncode == 1, (bad.returncode, bad.stdout, bad.stderr)
        assert bad.stderr.startswith("sha256 mismatch: expected 30e14955"), bad.stderr
    print("the README's example fetched, verified and installed maps/forest.pak; "
          "other bytes: exit 1 with the mismatch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
