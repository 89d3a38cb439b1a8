"""The loopback test server does what the backend's tests will rely on:
Range and If-Range exactly as HTTP says, and every fault it can inject."""
import http.client
import json
import os
import select
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BODY = bytes((i * 7 + 3) % 251 for i in range(300_000))


@pytest.fixture
def server(tmp_path):
    (tmp_path / "a.bin").write_bytes(BODY)
    (tmp_path / "empty.bin").write_bytes(b"")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "loopback_server.py"), "--root", str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("PORT "), line
    port = int(line.split()[1])
    yield port
    proc.kill()
    proc.wait(timeout=10)


def get(port, path, headers=None, method="GET", body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    try:
        data = response.read()
    except http.client.IncompleteRead as e:
        data = e.partial
    conn.close()
    return response, data


def control(port, endpoint, value):
    response, data = get(port, "/_control/" + endpoint, method="POST",
                         body=json.dumps(value), headers={"Content-Type": "application/json"})
    assert response.status == 200, data
    return json.loads(data)


def stats(port):
    return json.loads(get(port, "/_control/stats")[1])


def test_a_plain_get_sends_the_whole_file_with_an_etag(server):
    response, data = get(server, "/a.bin")
    assert response.status == 200
    assert data == BODY
    assert response.getheader("Accept-Ranges") == "bytes"
    assert response.getheader("ETag").startswith('"')


def test_a_range_sends_that_part_with_content_range(server):
    response, data = get(server, "/a.bin", {"Range": "bytes=1000-"})
    assert response.status == 206
    assert data == BODY[1000:]
    assert response.getheader("Content-Range") == f"bytes 1000-{len(BODY) - 1}/{len(BODY)}"
    response, data = get(server, "/a.bin", {"Range": "bytes=10-19"})
    assert (response.status, data) == (206, BODY[10:20])
    response, data = get(server, "/a.bin", {"Range": "bytes=-5"})
    assert (response.status, data) == (206, BODY[-5:])


def test_if_range_honours_the_range_only_for_the_current_etag(server):
    etag = get(server, "/a.bin")[0].getheader("ETag")
    response, data = get(server, "/a.bin", {"Range": "bytes=100-", "If-Range": etag})
    assert (response.status, data) == (206, BODY[100:])
    response, data = get(server, "/a.bin", {"Range": "bytes=100-", "If-Range": '"stale"'})
    assert (response.status, data) == (200, BODY)


def test_an_unsatisfiable_range_is_416_and_a_missing_file_404(server):
    response, _ = get(server, "/a.bin", {"Range": f"bytes={len(BODY)}-"})
    assert response.status == 416
    assert response.getheader("Content-Range") == f"bytes */{len(BODY)}"
    assert get(server, "/missing.bin")[0].status == 404
    assert get(server, "/../etc/passwd")[0].status == 404


def test_drop_closes_the_connection_mid_body(server):
    control(server, "faults", [{"path": "/a.bin", "kind": "drop", "after_bytes": 70_000}])
    response, data = get(server, "/a.bin")
    assert response.status == 200
    assert data == BODY[:70_000]
    assert get(server, "/a.bin")[1] == BODY, "the fault applied once"


def test_status_faults_answer_with_retry_after(server):
    control(server, "faults", [
        {"path": "/a.bin", "kind": "status", "status": 503, "retry_after_s": 2},
        {"path": "/a.bin", "kind": "status", "status": 404}])
    response, _ = get(server, "/a.bin")
    assert (response.status, response.getheader("Retry-After")) == (503, "2")
    assert get(server, "/a.bin")[0].status == 404
    assert get(server, "/a.bin")[0].status == 200


def test_wrong_bytes_keeps_the_length_and_changes_one_byte(server):
    control(server, "faults", [{"path": "/a.bin", "kind": "wrong_bytes", "after_bytes": 12345}])
    _, data = get(server, "/a.bin")
    assert len(data) == len(BODY) and data != BODY
    assert [i for i in range(len(BODY)) if data[i] != BODY[i]] == [12345]


def test_ignore_range_answers_200_with_everything(server):
    control(server, "faults", [{"path": "/a.bin", "kind": "ignore_range"}])
    response, data = get(server, "/a.bin", {"Range": "bytes=100-"})
    assert (response.status, data) == (200, BODY)


def test_a_stall_delivers_the_whole_body_afterwards(server):
    control(server, "faults", [{"path": "/a.bin", "kind": "stall", "after_bytes": 1000,
                                "stall_s": 0.05}])
    assert get(server, "/a.bin")[1] == BODY


def test_a_hold_parks_the_body_until_its_path_is_released(server):
    control(server, "faults", [{"path": "/a.bin", "kind": "hold", "after_bytes": 70_000}])
    sock = socket.create_connection(("127.0.0.1", server), timeout=30)
    sock.sendall(b"GET /a.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    received = b""

    def read_until(n):
        nonlocal received
        while len(received) < n:
            chunk = sock.recv(65536)
            assert chunk, "the connection closed"
            received += chunk

    def quiet_for(seconds):  # Nothing more arrives within `seconds`.
        return not select.select([sock], [], [], seconds)[0]

    while b"\r\n\r\n" not in received:
        read_until(len(received) + 1)
    head = received.index(b"\r\n\r\n") + 4
    read_until(head + 70_000)
    assert received[head:] == BODY[:70_000]
    assert quiet_for(0.5), "held: nothing more comes until the release"
    control(server, "release", {"path": "/b.bin"})
    assert quiet_for(0.5), "another path's release does not free this one"
    assert control(server, "release", {"path": "/a.bin"}) == {"released": "/a.bin"}
    read_until(head + len(BODY))
    assert received[head:] == BODY
    sock.close()
    # Released stays released: a later hold of that path does not park.
    control(server, "faults", [{"path": "/a.bin", "kind": "hold", "after_bytes": 10}])
    assert get(server, "/a.bin")[1] == BODY


def test_a_throttled_body_arrives_intact_and_stats_count_it(server):
    control(server, "rate", {"rate_Bps": 50_000_000})
    assert get(server, "/a.bin", {"Range": "bytes=0-99"})[1] == BODY[:100]
    s = stats(server)["/a.bin"]
    assert s["requests"] == 1 and s["bytes_sent"] == 100
    assert s["statuses"] == [206] and s["ranges"] == [[0, 99]]
    control(server, "reset", {})
    assert stats(server) == {}


def test_an_empty_file_is_served(server):
    response, data = get(server, "/empty.bin")
    assert (response.status, data) == (200, b"")


def test_the_tcp_info_log_has_each_connections_window_and_timeout(tmp_path):
    (tmp_path / "a.bin").write_bytes(BODY)
    log = tmp_path / "tcp.jsonl"
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "loopback_server.py"), "--root", str(tmp_path),
         "--tcp-info-log", str(log)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().split()[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(2):  # Two requests on one kept-alive connection.
            conn.request("GET", "/a.bin")
            assert conn.getresponse().read() == BODY
        conn.close()
        get(port, "/_control/stats")  # Not a body: not logged.
    finally:
        proc.kill()
        proc.wait(timeout=10)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["when"] for x in lines] == ["request", "sent", "request", "sent"]
    assert len({x["peer"] for x in lines}) == 1
    for x in lines:
        assert x["path"] == "/a.bin"
        assert x["rto_us"] >= 200_000  # Linux's floor.
        assert x["mss"] > 0 and x["cwnd"] >= 1
        assert x["rtt_us"] > 0
    # The second request's idle time is the gap since the first body's last send.
    assert lines[2]["idle_ms"] < 10_000
    # By the second request the segments sent count all of the first body's
    # (as it is written, some may still be in the socket's buffer).
    assert lines[2]["data_segs_out"] >= len(BODY) // lines[2]["mss"]
    assert lines[3]["data_segs_out"] > lines[2]["data_segs_out"]
    assert all(x["retrans_segs"] == 0 for x in lines)
