#!/usr/bin/env python3
"""A loopback HTTP/1.1 file server for the backend's tests: Range, ETag and
If-Range, throttling, and fault injection. Standard library only.

Serves the files under --root at their relative paths, on 127.0.0.1 (or the
address given with --bind: bench/fidelity.py binds it inside a network
namespace of its own).
Prints "PORT <n>" on stdout once listening (port 0 picks a free one).

Control endpoints (JSON):
  POST /_control/faults  [{"path": "/a.bin", "kind": KIND, "count": 1, ...}, ...]
        queued for the next `count` GETs of that path, in order. Kinds:
          drop         close the connection after `after_bytes` of the body
          status       answer `status` (404, 429, 503, ...) with no body,
                       and `Retry-After: retry_after_s` when given
          wrong_bytes  flip one byte at `after_bytes` (same length)
          stall        stop for `stall_s` seconds after `after_bytes`, then go on
          hold         stop after `after_bytes` until /_control/release names
                       the path (at most `hold_s`, default 60 s), then go on: a
                       transfer parked mid-body for as long as a test needs
          ignore_range answer 200 with the whole body even to a Range request
          drip         after `after_bytes`, send the rest `drip_Bps` bytes a second
                       (default 1), one small write at a time: a hostile origin
          reset        reset the connection (RST) after `after_bytes` of the body
          big_header   send an extra header line of `header_bytes` (default 200000)
  POST /_control/rate    {"rate_Bps": N}  throttle each body to N bytes/s (0: unlimited);
                         {"shared_rate_Bps": N} throttle all bodies together, as one
                         link of N bytes/s would; {"latency_s": X} wait X before each
                         response (bench/fidelity.py's fallback when it cannot shape
                         a real link)
  POST /_control/release {"path": "/a.bin"} let held bodies of that path go on
                         (and any held later); {} releases every path
  POST /_control/reset   clear faults, releases and statistics
  GET  /_control/stats   {"/a.bin": {"requests": n, "bytes_sent": n,
                           "statuses": [...], "ranges": [...]}, ...}

Why not `python3 -m http.server`: it has no Range support, and libcurl reports
success for a 200 that ignores Range, which is exactly what tests must provoke.
"""
import argparse
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 64 * 1024
MAX_CONTROL_BODY = 1 << 20


class State:
    """Faults, throttle and statistics shared by all connections."""

    def __init__(self, root, rate_bps):
        self.root = os.path.realpath(root)
        self.rate_bps = rate_bps
        self.shared_rate_bps = 0  # One link for every connection.
        self.link_free_at = 0.0   # When that link has sent what is queued on it.
        self.latency_s = 0.0
        self.lock = threading.Lock()
        self.faults = {}  # path -> list of pending faults
        self.stats = {}
        self.etags = {}  # (path, size, mtime_ns) -> etag
        self.etag_salt = ""
        self.released = set()  # Paths whose holds are over; "*" for all.
        self.release_cond = threading.Condition(self.lock)

    def hold(self, path, limit_s):
        """Blocks until `path` is released or `limit_s` has passed."""
        with self.release_cond:
            self.release_cond.wait_for(
                lambda: path in self.released or "*" in self.released, timeout=limit_s)

    def take_fault(self, path):
        with self.lock:
            queue = self.faults.get(path)
            if not queue:
                return None
            fault = queue[0]
            fault["count"] -= 1
            if fault["count"] <= 0:
                queue.pop(0)
            return dict(fault)

    # Statistics are counted before the bytes go out, so that a client that
    # has received a response always finds it counted.
    def record(self, path, status, byte_range):
        with self.lock:
            s = self.stats.setdefault(
                path, {"requests": 0, "bytes_sent": 0, "statuses": [], "ranges": []})
            s["requests"] += 1
            s["statuses"].append(status)
            s["ranges"].append(byte_range)

    def count_sent(self, path, n):
        with self.lock:
            self.stats[path]["bytes_sent"] += n

    def etag(self, path, real):
        st = os.stat(real)
        key = (path, st.st_size, st.st_mtime_ns)
        with self.lock:
            if key in self.etags:
                return self.etags[key]
        digest = hashlib.sha256()
        with open(real, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        digest.update(self.etag_salt.encode())
        tag = '"' + digest.hexdigest()[:16] + '"'
        with self.lock:
            self.etags[key] = tag
        return tag


def parse_range(header, size):
    """One byte range of `bytes=a-b`, `bytes=a-` or `bytes=-n`, as (first,
    last) inclusive; None to serve the whole body (absent or several ranges);
    "unsatisfiable" when it starts past the end."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[len("bytes="):].strip().partition("-")
    try:
        if first == "":
            n = int(last)
            if n <= 0:
                return "unsatisfiable"
            return (max(0, size - n), size - 1)
        a = int(first)
        b = int(last) if last else size - 1
    except ValueError:
        return None
    if a >= size or a > b:
        return "unsatisfiable"
    return (a, min(b, size - 1))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # Keep-alive: libcurl reuses connections.
    # TCP_NODELAY on each connection, as nginx sets it on keep-alive ones: with
    # Nagle's algorithm the last partial segment of every response waits for
    # the ACK of the data before it, one round trip more per response.
    disable_nagle_algorithm = True
    server_version = "dfl-loopback/1"

    def log_message(self, *args):  # Quiet: tests read stats, not logs.
        pass

    @property
    def state(self):
        return self.server.state

    # --- control --------------------------------------------------------------

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        if length > MAX_CONTROL_BODY:
            return self.send_json(413, {"error": "control body too large"})
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError as e:
            return self.send_json(400, {"error": f"bad JSON: {e}"})
        if self.path == "/_control/faults":
            if not isinstance(body, list):
                return self.send_json(400, {"error": "expected a list of faults"})
            with self.state.lock:
                for fault in body:
                    fault.setdefault("count", 1)
                    fault.setdefault("after_bytes", 0)
                    self.state.faults.setdefault(fault["path"], []).append(fault)
            return self.send_json(200, {"queued": len(body)})
        if self.path == "/_control/rate":
            self.state.rate_bps = int(body.get("rate_Bps", self.state.rate_bps))
            self.state.shared_rate_bps = int(body.get("shared_rate_Bps", self.state.shared_rate_bps))
            self.state.latency_s = float(body.get("latency_s", self.state.latency_s))
            return self.send_json(200, {"rate_Bps": self.state.rate_bps,
                                        "shared_rate_Bps": self.state.shared_rate_bps,
                                        "latency_s": self.state.latency_s})
        if self.path == "/_control/release":
            if body is not None and not isinstance(body, dict):
                return self.send_json(400, {"error": "expected {\"path\": ...} or {}"})
            path = (body or {}).get("path", "*")
            with self.state.release_cond:
                self.state.released.add(path)
                self.state.release_cond.notify_all()
            return self.send_json(200, {"released": path})
        if self.path == "/_control/reset":
            with self.state.lock:
                self.state.faults.clear()
                self.state.stats.clear()
                self.state.released.clear()
            return self.send_json(200, {"reset": True})
        return self.send_json(404, {"error": "unknown control endpoint"})

    def send_json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # --- files ------------------------------------------------------------------

    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        if self.path == "/_control/stats":
            with self.state.lock:
                return self.send_json(200, self.state.stats)
        self.serve(head=False)

    def serve(self, head):
        if self.state.latency_s > 0:
            time.sleep(self.state.latency_s)  # A round trip before the answer.
        # Percent-decoded (UTF-8), as nginx does: faults and statistics name
        # the decoded path, "/a b.bin".
        path = urllib.parse.unquote(self.path.split("?", 1)[0], errors="surrogateescape")
        real = os.path.realpath(os.path.join(self.state.root, path.lstrip("/")))
        if not real.startswith(self.state.root + os.sep) or not os.path.isfile(real):
            self.state.record(path, 404, None)
            return self.send_empty(404)
        fault = None if head else self.state.take_fault(path)
        if fault and fault["kind"] == "status":
            extra = {}
            if "retry_after_s" in fault:
                extra["Retry-After"] = str(fault["retry_after_s"])
            self.state.record(path, fault["status"], None)
            return self.send_empty(fault["status"], extra)

        size = os.path.getsize(real)
        etag = self.state.etag(path, real)
        byte_range = parse_range(self.headers.get("Range"), size)
        if_range = self.headers.get("If-Range")
        if byte_range is not None and if_range is not None and if_range != etag:
            byte_range = None  # The representation changed: send it all.
        if fault and fault["kind"] == "ignore_range":
            byte_range = None
        if byte_range == "unsatisfiable":
            self.state.record(path, 416, self.headers.get("Range"))
            return self.send_empty(416, {"Content-Range": f"bytes */{size}"})

        first, last = byte_range if byte_range else (0, size - 1)
        length = last - first + 1 if size > 0 else 0
        status = 206 if byte_range else 200
        self.state.record(path, status, [first, last] if byte_range else None)
        if not head:
            self.log_tcp_info(path, "request")  # Before the headers: the idle time is right.
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        if fault and fault["kind"] == "big_header":
            self.send_header("X-Padding", "p" * int(fault.get("header_bytes", 200000)))
        if byte_range:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.end_headers()
        if not head:
            self.send_body(path, real, first, length, fault)
            self.log_tcp_info(path, "sent")

    def log_tcp_info(self, path, when):
        """With --tcp-info-log: this connection's TCP state as the kernel keeps it (its
        window, smoothed round trip and retransmission timeout, and how long it has
        been idle), one JSON line per request and one once its body is written."""
        log = getattr(self.server, "tcp_info_log", None)
        if log is None:
            return
        try:
            raw = self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 160)
        except OSError:
            return
        # struct tcp_info (linux/tcp.h): 8 one-byte fields, then 32-bit ones from
        # tcpi_rto on (to tcpi_total_retrans), four 64-bit ones, then 32-bit ones
        # again (tcpi_segs_out on; tcpi_data_segs_out since Linux 4.6).
        f = struct.unpack_from("=24I", raw, 8)
        record = {"t": time.monotonic(), "peer": self.client_address[1], "path": path,
                  "when": when, "rto_us": f[0], "mss": f[2],
                  "idle_ms": f[9], "rtt_us": f[15], "rttvar_us": f[16],
                  "ssthresh": f[17], "cwnd": f[18], "retrans_segs": f[23]}
        if len(raw) >= 160:
            record["data_segs_out"] = struct.unpack_from("=I", raw, 156)[0]
        line = json.dumps(record)
        with self.server.tcp_info_lock:
            log.write(line + "\n")
            log.flush()

    def send_body(self, path, real, first, length, fault):
        sent = 0
        started = time.monotonic()
        with open(real, "rb") as f:
            f.seek(first)
            while sent < length:
                block = f.read(min(CHUNK, length - sent))
                if not block:
                    break
                if fault and sent <= fault["after_bytes"] < sent + len(block):
                    cut = fault["after_bytes"] - sent
                    if fault["kind"] == "drop":
                        self.state.count_sent(path, cut)
                        self.wfile.write(block[:cut])
                        self.wfile.flush()
                        self.close_now()
                        return sent + cut
                    if fault["kind"] == "reset":
                        self.state.count_sent(path, cut)
                        self.wfile.write(block[:cut])
                        self.wfile.flush()
                        self.reset_now()
                        return sent + cut
                    if fault["kind"] == "drip":
                        return sent + self.drip(path, block[:cut], real, first + sent + cut,
                                                length - sent - cut, fault)
                    if fault["kind"] == "wrong_bytes":
                        block = block[:cut] + bytes([block[cut] ^ 0xFF]) + block[cut + 1:]
                    if fault["kind"] in ("stall", "hold"):
                        self.state.count_sent(path, len(block))
                        try:
                            self.wfile.write(block[:cut])
                            self.wfile.flush()
                            if fault["kind"] == "stall":
                                time.sleep(float(fault.get("stall_s", 1.0)))
                            else:
                                self.state.hold(path, float(fault.get("hold_s", 60.0)))
                            self.wfile.write(block[cut:])
                        except (BrokenPipeError, ConnectionResetError):
                            return sent + cut
                        sent += len(block)
                        fault = None
                        continue
                self.state.count_sent(path, len(block))
                if self.state.shared_rate_bps > 0:
                    # Queue the block on the one shared link, and send it when it is due.
                    with self.state.lock:
                        start = max(self.state.link_free_at, time.monotonic())
                        self.state.link_free_at = start + len(block) / self.state.shared_rate_bps
                        due = self.state.link_free_at
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                try:
                    self.wfile.write(block)
                except (BrokenPipeError, ConnectionResetError):
                    return sent
                sent += len(block)
                if self.state.rate_bps > 0:
                    # Sleep until the bytes sent so far are due at the rate.
                    due = started + sent / self.state.rate_bps
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
        return sent

    def drip(self, path, head, real, offset, rest, fault):
        """Sends `head` at once, then the `rest` bytes from `offset` slowly."""
        rate = float(fault.get("drip_Bps", 1))
        self.wfile.write(head)
        self.wfile.flush()
        self.state.count_sent(path, len(head))
        step = max(1, int(rate))  # A write a second.
        sent = 0
        with open(real, "rb") as f:
            f.seek(offset)
            while sent < rest:
                time.sleep(step / rate)
                piece = f.read(min(step, rest - sent))
                try:
                    self.wfile.write(piece)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    break
                self.state.count_sent(path, len(piece))
                sent += len(piece)
        self.close_connection = True
        return len(head) + sent

    def reset_now(self):
        """Closes with a reset (RST), not the orderly FIN of close_now."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def close_now(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def send_empty(self, status, headers=None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that hangs up mid-body (an abort, a dropped transfer) is normal here.
        if isinstance(sys.exc_info()[1], OSError):  # Broken pipes, resets, closed sockets.
            return
        super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rate-Bps", type=int, default=0)
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--etag-salt", default="",
                        help="mixed into every ETag: a mirror whose ETags differ from another's")
    parser.add_argument("--congestion-control", default=None,
                        help="TCP congestion control of every connection (e.g. cubic, bbr)")
    parser.add_argument("--tcp-info-log", default=None,
                        help="append each connection's TCP state (window, RTO, idle time) "
                             "here, a JSON line as each request comes and as its body ends")
    args = parser.parse_args()
    server = Server((args.bind, args.port), Handler)
    server.tcp_info_log = open(args.tcp_info_log, "a") if args.tcp_info_log else None
    server.tcp_info_lock = threading.Lock()
    if args.congestion_control:
        # Set on the listening socket, inherited by each accepted one.
        try:
            server.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION,
                                     args.congestion_control.encode())
        except OSError as e:
            print(f"loopback_server: --congestion-control {args.congestion_control}: {e}; "
                  "the system's default stays", file=sys.stderr)
    server.state = State(args.root, args.rate_Bps)
    server.state.etag_salt = args.etag_salt
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
