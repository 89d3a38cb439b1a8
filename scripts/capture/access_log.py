#!/usr/bin/python3
"""Makes a real nginx access log: nginx on 127.0.0.1 serves a catalogue of
files at a per-connection rate, and simulated clients fetch from it, some
giving up before the end; nginx writes the log.

    scripts/capture/access_log.py OUT_FILE [--clients N] [--seconds S] [--seed S]

Each client (its own User-Agent, "client-N"; every request comes from
127.0.0.1) asks for objects drawn from a Zipf law (alpha 0.9) over 300 files
whose sizes are lognormal (median 150 kB, sigma 1.2, at most 8 MB), 0 to 0.4 s
apart. It gives up on one request in eight after an exponential patience
(mean 0.3 s) and closes the connection mid-body: nginx logs a 200 with fewer
bytes. One request in twenty-five asks the API behind nginx, which answers
after 0.1 to 1.5 s; the client gives up after 0.5 s, and nginx logs 499 when
it had not answered. One in forty asks for a file that is not there (404),
and a client that fetched a file asks again with its ETag one time in ten
(304). The log is the Combined Log Format with $request_time after it.
"""
import argparse
import bisect
import http.client
import math
import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time

FORMAT = ('\'$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
          '"$http_referer" "$http_user_agent" $request_time\'')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_server(port, rng_seed, stop):
    """An upstream that answers each request after a random delay."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    listener.settimeout(0.2)
    rng = random.Random(rng_seed)

    def answer(conn, delay):
        try:
            conn.recv(65536)
            time.sleep(delay)
            body = b'{"ok": true}' + b" " * 2000
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        except OSError:
            pass
        finally:
            conn.close()

    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        threading.Thread(target=answer, args=(conn, rng.uniform(0.1, 1.5)), daemon=True).start()
    listener.close()


def client(number, port, args, files, cumulative, stop_at):
    rng = random.Random(args.seed * 1000 + number)
    agent = "client-%d" % number
    etags = {}
    while time.monotonic() < stop_at:
        time.sleep(rng.uniform(0, 0.4))
        roll = rng.random()
        headers = {"User-Agent": agent}
        patience = None
        if roll < 0.04:
            path = "/api/item/%d" % rng.randrange(50)
            patience = 0.5
        elif roll < 0.065:
            path = "/files/missing-%d.bin" % rng.randrange(1000)
        else:
            name = files[bisect.bisect_left(cumulative, rng.random() * cumulative[-1])]
            path = "/files/" + name
            if name in etags and rng.random() < 0.1:
                headers["If-None-Match"] = etags[name]
            elif rng.random() < 1 / 8:
                patience = rng.expovariate(1 / 0.3)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=patience or 30)
        try:
            conn.request("GET", path, headers=headers)
            started = time.monotonic()
            response = conn.getresponse()
            if response.getheader("ETag"):
                etags[path[len("/files/"):]] = response.getheader("ETag")
            while True:
                if patience is not None and time.monotonic() - started > patience:
                    break  # Gives up mid-body.
                if not response.read(16384):
                    break
        except (socket.timeout, OSError, http.client.HTTPException):
            pass  # Gave up before the response (the API's 499).
        finally:
            conn.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=int, default=1_000_000, help="bytes/s a connection")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="access_log.")
    os.chmod(work, 0o755)  # nginx's worker (another user) reads the files.
    try:
        root = os.path.join(work, "root", "files")
        os.makedirs(root)
        files, cumulative, total = [], [], 0.0
        for rank in range(300):
            size = min(8_000_000, max(500, int(rng.lognormvariate(math.log(150_000), 1.2))))
            name = "obj-%03d.bin" % rank
            with open(os.path.join(root, name), "wb") as f:
                f.write(os.urandom(size))
            files.append(name)
            total += 1 / (rank + 1) ** 0.9
            cumulative.append(total)
        port, api_port = free_port(), free_port()
        os.makedirs(os.path.join(work, "logs"))
        with open(os.path.join(work, "nginx.conf"), "w") as conf:
            conf.write("daemon off;\nworker_processes 1;\npid %s/nginx.pid;\n" % work)
            conf.write("error_log %s/logs/error.log warn;\nevents { worker_connections 512; }\n" % work)
            conf.write("http {\n  log_format timed %s;\n" % FORMAT)
            conf.write("  access_log %s/logs/access.log timed;\n" % work)
            for temp in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
                conf.write("  %s_temp_path %s/tmp-%s;\n" % (temp, work, temp))
            conf.write("  server {\n    listen 127.0.0.1:%d;\n    root %s/root;\n" % (port, work))
            conf.write("    location /files/ { limit_rate %d; }\n" % args.rate)
            conf.write("    location /api/ { proxy_pass http://127.0.0.1:%d; }\n  }\n}\n" % api_port)
        stop = threading.Event()
        api = threading.Thread(target=api_server, args=(api_port, args.seed, stop), daemon=True)
        api.start()
        nginx = subprocess.Popen(["nginx", "-p", work + "/", "-c", work + "/nginx.conf"])
        try:
            for _ in range(500):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.01)
            stop_at = time.monotonic() + args.seconds
            clients = [threading.Thread(target=client,
                                        args=(n, port, args, files, cumulative, stop_at))
                       for n in range(args.clients)]
            for c in clients:
                c.start()
            for c in clients:
                c.join()
            time.sleep(1.0)  # nginx logs a response once it has ended.
        finally:
            nginx.terminate()
            nginx.wait()
            stop.set()
        shutil.copy(os.path.join(work, "logs", "access.log"), args.out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
