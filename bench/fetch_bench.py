#!/usr/bin/python3
"""Times `demandflight fetch` against curl and aria2c on loopback nginx.

    bench/fetch_bench.py DEMANDFLIGHT [--work DIR] [--runs N] [--sets small,medium,large]
                         [--baseline OTHER_DEMANDFLIGHT] [--drop-caches] [--seed N]
                         [--protocols http,https1.1,h2] [--baseline-name NAME]

nginx (own config, pid, logs and temp paths, 127.0.0.1 only, sendfile on)
serves three sets: 2,000 x 64 KiB, 200 x 4 MiB and 1 x 1 GiB. Each set is
fetched by
  - demandflight fetch: SHA-256 checked against the manifest, fsync, atomic
    rename into the cache, directory fsync; 8 transfers;
  - curl --parallel --parallel-max 8: no verification, no fsync;
  - the same curl, then `sync -f` on its output directory: its files made
    durable at the cheapest (one syncfs for all, no rename, no verification),
    for comparing durable downloads with durable downloads;
  - aria2c -j 8 (--file-allocation=none, its fastest setting here);
and once more with three requests per artifact (demandflight: three callers
per artifact; curl and aria2c: three URLs, three output files), and once
with two processes (`--copies ...,2p`: two demandflight fetch processes
started together on one cache directory, each asking for every artifact;
curl and aria2c: two URLs, two output files). The tools
run interleaved, N times each, in a random order per run (--seed); the table
gives medians of the same run, and the ratios are against curl and aria2c
measured beside it. nginx's access log
shows how often each file was requested during the demandflight runs: with
duplicates, in one process or two, demandflight must transfer each artifact
exactly once.

--protocols picks how the tools talk to nginx, one group of rows each: `http`
(HTTP/1.1 in the clear, the default), `https1.1` (HTTP/1.1 over TLS: demandflight
--http 1.1, curl --http1.1) and `h2` (HTTP/2 over TLS: demandflight's default
negotiation, one connection whose streams are the 8 transfers; curl --http2,
which multiplexes its --parallel transfers too). A certificate for 127.0.0.1 is
made for the run (openssl); every tool is told to trust it. aria2c has no HTTP/2:
in the h2 rows it speaks HTTP/1.1 over TLS.

A second table splits the CPU: each tool's user and system CPU-seconds
(medians, and the least system time), its context switches per artifact, and
its CPU against the floor, curl's CPU-seconds plus the SHA-256 of the set's
bytes timed in this process once a run (print_cpu_table says why user and
system time are apart), over all runs and over the machine's fast and slow
runs apart.

Run as root, each tool's run writes to an ext4 file system made for it on a
loop device (--fresh-fs; mount_fresh_fs says why); otherwise to --work.
"""
import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time

SETS = {
    "small": (2000, 64 * 1024),
    "medium": (200, 4 * 1024 * 1024),
    "large": (1, 1024 * 1024 * 1024),
}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def make_set(root, name, count, size):
    """Random files and their manifest; kept between runs when complete."""
    directory = os.path.join(root, "www", name)
    manifest = os.path.join(root, f"{name}.jsonl")
    if os.path.exists(manifest):
        return manifest
    os.makedirs(directory, exist_ok=True)
    lines = []
    chunk = 4 * 1024 * 1024
    for i in range(count):
        file_name = f"{i:05d}.bin"
        digest = hashlib.sha256()
        with open(os.path.join(directory, file_name), "wb") as f:
            left = size
            while left > 0:
                data = os.urandom(min(chunk, left))
                digest.update(data)
                f.write(data)
                left -= len(data)
        lines.append(json.dumps({
            "op": "artifact", "id": f"{name}-{i}", "resource": f"{name}/{file_name}",
            "revision": "r1", "target": "any", "generation": 0, "size": size,
            "origin": "nginx", "sha256": digest.hexdigest()}))
    with open(manifest + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.rename(manifest + ".tmp", manifest)
    return manifest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certificate(prefix):
    """A self-signed certificate for 127.0.0.1 (key and certificate in PEM)."""
    key, cert = os.path.join(prefix, "key.pem"), os.path.join(prefix, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    return key, cert


def start_nginx(root):
    prefix = os.path.join(root, "nginx")
    os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
    port, tls_port = free_port(), free_port()
    key, cert = make_certificate(prefix)
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log warn;
events {{ worker_connections 1024; }}
http {{
  log_format bench '"$request" $status $body_bytes_sent $connection';
  access_log {prefix}/logs/access.log bench;
  client_body_temp_path {prefix}/tmp-body;
  proxy_temp_path {prefix}/tmp-proxy;
  fastcgi_temp_path {prefix}/tmp-fastcgi;
  uwsgi_temp_path {prefix}/tmp-uwsgi;
  scgi_temp_path {prefix}/tmp-scgi;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  http2_max_concurrent_streams 128;
  server {{
    listen 127.0.0.1:{port};
    listen 127.0.0.1:{tls_port} ssl http2;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    root {root}/www;
  }}
}}
""")
    process = subprocess.Popen(["nginx", "-p", prefix, "-c", conf, "-g", "daemon off;"])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            socket.create_connection(("127.0.0.1", tls_port), timeout=0.1).close()
            return process, port, tls_port, cert, os.path.join(prefix, "logs", "access.log")
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("nginx did not start; see " + os.path.join(prefix, "logs", "error.log"))


def mount_fresh_fs(out, payload_bytes):
    """A new ext4 file system at `out` (a sparse image beside it on a loop
    device), room for the payload and its staging copies: the run's writes,
    its syncs and its file creations meet no other run's dirty pages and no
    recently deleted inodes (on a shared file system a syncfs also writes back
    what an earlier tool left dirty, and ext4 creates files slowly for a while
    after thousands were deleted), so every run starts the same."""
    os.makedirs(out, exist_ok=True)
    image = out + ".img"
    with open(image, "wb") as f:
        f.truncate(2 * payload_bytes + (512 << 20))
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
    subprocess.run(["mount", "-o", "loop", image, out], check=True)


def unmount_fresh_fs(out):
    subprocess.run(["umount", out], check=True)
    os.remove(out + ".img")
    os.rmdir(out)


class Usage(tuple):
    """CPU-seconds in user space and in the kernel, and context switches
    (voluntary and not), of the children waited for; `cpu` is their sum."""
    __slots__ = ()

    def __new__(cls, user=0.0, system=0.0, switches=0):
        return super().__new__(cls, (user, system, switches))

    user = property(lambda self: self[0])
    system = property(lambda self: self[1])
    switches = property(lambda self: self[2])
    cpu = property(lambda self: self[0] + self[1])

    def __add__(self, other):
        return Usage(*(a + b for a, b in zip(self, other)))

    def __sub__(self, other):
        return Usage(*(a - b for a, b in zip(self, other)))


def children_usage():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Usage(r.ru_utime, r.ru_stime, r.ru_nvcsw + r.ru_nivcsw)


def sha256_floor(root, names):
    """User CPU-seconds of the SHA-256 of the set's bytes in this process
    (OpenSSL's, with the CPU's SHA extensions where it has them): what
    verifying the downloads must cost at least, beside receiving them."""
    start = resource.getrusage(resource.RUSAGE_SELF).ru_utime  # Reading is system time.
    for name in names:
        with open(os.path.join(root, "www", name), "rb") as f:
            hashlib.file_digest(f, "sha256")
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime - start


def timed(command, cwd=None):
    """Runs `command`: its wall time, Usage and standard output."""
    usage0, t0 = children_usage(), time.perf_counter()
    done = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    wall, cpu = time.perf_counter() - t0, children_usage() - usage0
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return wall, cpu, done.stdout


def resources(manifest):
    with open(manifest) as f:
        return [json.loads(line)["resource"] for line in f if line.strip()]


# How each tool speaks each protocol (see --protocols).
CURL_FLAGS = {"http": [], "https1.1": ["--http1.1"], "h2": ["--http2"]}
FETCH_FLAGS = {"http": [], "https1.1": ["--http", "1.1"], "h2": ["--http", "negotiate"]}


def run_curl(url, names, out, copies, tls=()):
    config = os.path.join(out, "curl.config")
    os.makedirs(out, exist_ok=True)
    with open(config, "w") as f:
        for copy in range(copies):
            for i, name in enumerate(names):
                f.write(f'url = "{url}/{name}"\noutput = "{out}/{copy}-{i}.bin"\n')
    return timed(["curl", "--parallel", "--parallel-max", "8", "--silent", "--show-error",
                  "--fail", *tls, "-K", config])


def run_curl_sync(url, names, out, copies, tls=()):
    """curl, then `sync -f` on its output: the same files made durable at the cheapest
    (one syncfs for all of them, where demandflight flushes each file and renames it)."""
    wall, cpu, text = run_curl(url, names, out, copies, tls)
    sync_wall, sync_cpu, _ = timed(["sync", "-f", out])
    return wall + sync_wall, cpu + sync_cpu, text


def run_aria2(url, names, out, copies, tls=()):
    listing = os.path.join(out, "aria2.list")
    os.makedirs(out, exist_ok=True)
    with open(listing, "w") as f:
        for copy in range(copies):
            for i, name in enumerate(names):
                f.write(f"{url}/{name}\n  out={copy}-{i}.bin\n")
    return timed(["aria2c", "-j", "8", "-i", listing, "-d", out, "--quiet",
                  "--file-allocation=none", "--allow-overwrite=true",
                  "--auto-file-renaming=false", "--console-log-level=error", *tls])


def fetch_command(binary, url, manifest, out, copies, extra):
    return [binary, "fetch", "--base-url", url, "--cache", out, "--copies", str(copies),
            "--max-transfers", "8", "--max-per-origin", "8", "--progress", "none"] + extra + \
        [manifest]


def run_demandflight(binary, url, manifest, out, copies, extra):
    return timed(fetch_command(binary, url, manifest, out, copies, extra))


def run_demandflight_processes(binary, url, manifest, out, processes, extra):
    """`processes` fetch runs of the whole manifest, started together on one cache."""
    usage0, t0 = children_usage(), time.perf_counter()
    running = [subprocess.Popen(fetch_command(binary, url, manifest, out, 1, extra),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(processes)]
    outputs = [p.communicate() for p in running]
    wall, cpu = time.perf_counter() - t0, children_usage() - usage0
    for p, (stdout, stderr) in zip(running, outputs):
        if p.returncode != 0:
            raise SystemExit(f"fetch failed ({p.returncode}):\n{stdout}\n{stderr}")
    return wall, cpu, "".join(o for o, _ in outputs)


def requests_per_file(access_log, start_offset):
    """Requests per path since `start_offset`, and the connections they came on."""
    counts, connections = {}, set()
    with open(access_log) as f:
        f.seek(start_offset)
        for line in f:
            parts = line.split('"')
            if len(parts) > 2:
                path = parts[1].split(" ")[1] if len(parts[1].split(" ")) > 1 else ""
                counts[path] = counts.get(path, 0) + 1
                connections.add(parts[2].split()[-1])
    return counts, connections


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("demandflight")
    parser.add_argument("--work", default="/tmp/demandflight-fetch-bench")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sets", default="small,medium,large",
                        help="small first: its files are created before any mass deletion")
    parser.add_argument("--json", default=None, help="write the raw figures here")
    parser.add_argument("--fetch-args", default="", help="more flags for demandflight fetch")
    parser.add_argument("--baseline-fetch-args", default=None,
                        help="the baseline's flags instead of --fetch-args (\"\": none), to "
                             "measure what a flag costs: --fetch-args \"--record R\" "
                             "--baseline SAME_BINARY --baseline-fetch-args \"\"")
    parser.add_argument("--copies", default="1,3,2p",
                        help="callers per artifact, one row each; Np: N processes")
    parser.add_argument("--baseline", default=None,
                        help="another demandflight binary, run interleaved with the first "
                             "(an A/B of two builds in the same conditions)")
    parser.add_argument("--baseline-name", default="baseline binary",
                        help="the baseline's rows are labelled so (e.g. 'portable build')")
    parser.add_argument("--seed", type=int, default=1,
                        help="seeds the order of the tools in each run")
    parser.add_argument("--protocols", default="http",
                        help="comma-separated: http, https1.1, h2 (HTTP/2 over TLS); a group of "
                             "rows each")
    parser.add_argument("--drop-caches", action="store_true",
                        help="sync and drop the kernel's caches before each set, and sync "
                             "before each run (root)")
    parser.add_argument("--fresh-fs", choices=["auto", "on", "off"], default="auto",
                        help="each run writes to an ext4 file system of its own, made for it "
                             "on a loop device (root; auto: when root)")
    args = parser.parse_args()
    binaries = {"demandflight": os.path.abspath(args.demandflight)}
    if args.baseline:
        binaries["baseline"] = os.path.abspath(args.baseline)
    tools = ["curl", "curl+sync", "aria2c"] + list(binaries)
    for program, package in (("curl", "curl"), ("aria2c", "aria2"), ("nginx", "nginx-light")):
        if shutil.which(program) is None:
            sys.exit(f"fetch_bench: {program} is not installed (Debian package {package}; "
                     f"scripts/install-deps --bench installs it)")
    shuffle = random.Random(args.seed)
    os.makedirs(args.work, exist_ok=True)

    sets = [s for s in args.sets.split(",") if s]
    manifests = {}
    for name in sets:
        count, size = SETS[name]
        log(f"preparing {name}: {count} x {size} bytes")
        manifests[name] = make_set(args.work, name, count, size)
    if args.drop_caches and os.geteuid() != 0:
        log("--drop-caches needs root: skipped")
        args.drop_caches = False
    fresh_fs = args.fresh_fs == "on" or (args.fresh_fs == "auto" and os.geteuid() == 0
                                         and shutil.which("mkfs.ext4") is not None)
    if args.fresh_fs == "on" and os.geteuid() != 0:
        raise SystemExit("--fresh-fs on: making and mounting a file system needs root")
    print(f"output file systems: {'a fresh ext4 for each run' if fresh_fs else 'the --work directory'}",
          flush=True)

    protocols = [p for p in args.protocols.split(",") if p]
    for p in protocols:
        if p not in CURL_FLAGS:
            raise SystemExit(f"--protocols: unknown protocol {p!r} (http, https1.1, h2)")
    nginx, port, tls_port, cert, access_log = start_nginx(args.work)
    rows, raw, kinds = [], [], []
    try:
        for name in sets:
            count, size = SETS[name]
            names = resources(manifests[name])
            if args.drop_caches:
                # The same start for every set: no dirty pages and no cached metadata
                # of earlier sets (ext4 creates files much more slowly while its
                # block-device cache holds many buffers of recently deleted inodes),
                # then the set itself read back into the page cache for nginx.
                subprocess.run(["sync"], check=True)
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
                for file_name in names:
                    with open(os.path.join(args.work, "www", file_name), "rb") as f:
                        while f.read(1 << 22):
                            pass
            for protocol, copies_spec in [(p, c) for p in protocols
                                          for c in args.copies.split(",")]:
                url = (f"http://127.0.0.1:{port}" if protocol == "http"
                       else f"https://127.0.0.1:{tls_port}")
                tls = [] if protocol == "http" else ["--cacert", cert]
                fetch_extra = {
                    tool: (args.baseline_fetch_args if tool == "baseline"
                           and args.baseline_fetch_args is not None else args.fetch_args).split()
                    + FETCH_FLAGS[protocol] + tls for tool in binaries}
                processes = int(copies_spec[:-1]) if copies_spec.endswith("p") else 1
                copies = processes if processes > 1 else int(copies_spec)
                samples = {t: [] for t in tools}
                floors = []  # The SHA-256 of the set's bytes, once a run.
                max_requests = max_connections = 0
                for run in range(args.runs):
                    floors.append(sha256_floor(args.work, names))
                    # A random order in each run (seeded; printed): what a tool
                    # follows matters here (on a VM, the tool that runs right
                    # after aria2c is slower), and a rotation of a fixed order
                    # would always put the same tool there.
                    order = list(tools)
                    shuffle.shuffle(order)
                    print(f"  {name} {protocol} x{copies_spec} run {run} order: "
                          f"{', '.join(order)}", flush=True)
                    for tool in order:
                        # A fresh directory per run. Many small files are deleted only
                        # after the set: ext4 creates files slowly for a while after
                        # thousands were deleted (it scans for recently deleted inodes),
                        # which would time the clean-up instead of the tool.
                        out = os.path.join(args.work, "out", f"{tool}-{protocol}-{copies_spec}-{run}")
                        if fresh_fs:
                            mount_fresh_fs(out, count * size * copies)
                        if args.drop_caches:
                            # No run pays for the writeback of an earlier run's
                            # dirty pages (curl's and aria2c's files are not synced).
                            subprocess.run(["sync"], check=True)
                        curl_tls = CURL_FLAGS[protocol] + tls
                        if tool == "curl":
                            wall, cpu, _ = run_curl(url, names, out, copies, curl_tls)
                        elif tool == "curl+sync":
                            wall, cpu, _ = run_curl_sync(url, names, out, copies, curl_tls)
                        elif tool == "aria2c":
                            wall, cpu, _ = run_aria2(
                                url, names, out, copies,
                                ["--ca-certificate", cert] if protocol != "http" else [])
                        else:
                            offset = os.path.getsize(access_log)
                            if processes > 1:
                                wall, cpu, text = run_demandflight_processes(
                                    binaries[tool], url, manifests[name], out, processes,
                                    fetch_extra[tool])
                            else:
                                wall, cpu, text = run_demandflight(binaries[tool], url,
                                                                   manifests[name], out, copies,
                                                                   fetch_extra[tool])
                            time.sleep(0.2)  # nginx writes its log line after the response.
                            counts, used = requests_per_file(access_log, offset)
                            max_requests = max([max_requests] + list(counts.values()))
                            max_connections = max(max_connections, len(used))
                            if len(counts) != count:
                                raise SystemExit(f"demandflight requested {len(counts)} of "
                                                 f"{count} files:\n{text}")
                        if fresh_fs:
                            unmount_fresh_fs(out)
                        elif size >= 2**20:
                            # Few large files: delete them at once (their dirty pages
                            # go with them), so that no run inherits another's writeback.
                            shutil.rmtree(out, ignore_errors=True)
                        samples[tool].append((wall, cpu))
                        raw.append({"set": name, "protocol": protocol, "copies": copies_spec,
                                    "tool": tool, "run": run, "wall_s": wall, "cpu_s": cpu.cpu,
                                    "user_s": cpu.user, "system_s": cpu.system,
                                    "context_switches": cpu.switches,
                                    "sha256_floor_s": floors[-1]})
                        log(f"  {name} {protocol} x{copies_spec} {tool:12s} run {run}: {wall:7.3f} s "
                            f"wall, {cpu.cpu:6.2f} CPU-s ({cpu.user:.2f} user, "
                            f"{cpu.system:.2f} system), {cpu.switches} context switches")
                med = {t: statistics.median(w for w, _ in s) for t, s in samples.items()}
                cpu = {t: statistics.median(c.cpu for _, c in s) for t, s in samples.items()}
                mib = count * size / 2**20
                label = f"{processes} processes" if processes > 1 else str(copies)
                rows.append((name, count, size, label, med, cpu, mib, max_requests, protocol,
                             max_connections))
                kinds.append((name, count, size, label, protocol, samples,
                              statistics.median(floors)))
    finally:
        nginx.terminate()
        nginx.wait()
        out_root = os.path.join(os.path.abspath(args.work), "out")
        with open("/proc/mounts") as mounts:  # A run that failed leaves its file system.
            for line in mounts:
                if line.split()[1].startswith(out_root + "/"):
                    subprocess.run(["umount", line.split()[1]], check=False)
        shutil.rmtree(out_root, ignore_errors=True)

    baseline_name = args.baseline_name
    print("| set | protocol | callers/artifact | demandflight | curl | curl + sync | aria2c | vs curl "
          "| vs curl + sync | vs aria2c | requests/artifact (demandflight) "
          "| connections (demandflight) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, count, size, copies, med, cpu, mib, max_requests, protocol, connections in rows:
        def cell(tool):
            rate = f"{mib / med[tool]:.0f} MiB/s" if size >= 2**20 else \
                f"{count / med[tool]:.0f} files/s"
            return f"{med[tool]:.2f} s, {rate}, {cpu[tool]:.1f} CPU-s"
        label = set_label(count, size)
        print(f"| {label} | {protocol} | {copies} | {cell('demandflight')} | {cell('curl')} | "
              f"{cell('curl+sync')} | {cell('aria2c')} | "
              f"{med['curl'] / med['demandflight']:.2f}x | "
              f"{med['curl+sync'] / med['demandflight']:.2f}x | "
              f"{med['aria2c'] / med['demandflight']:.2f}x | {max_requests} | {connections} |")
        if "baseline" in med:
            print(f"|   {baseline_name} | {protocol} | {copies} | {cell('baseline')} | | | | "
                  f"{med['curl'] / med['baseline']:.2f}x | "
                  f"{med['curl+sync'] / med['baseline']:.2f}x | "
                  f"{med['aria2c'] / med['baseline']:.2f}x | | |")
    print_cpu_table(kinds, args.baseline_name)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)


def set_label(count, size):
    return f"{count} x {size // 1024} KiB" if size < 2**20 else f"{count} x {size // 2**20} MiB"


def print_cpu_table(kinds, baseline_name="baseline"):
    """Where the CPU goes, against the floor: curl's CPU-seconds plus the SHA-256
    of the same bytes. Medians of user and system time apart: on the development
    machine the system time of one tool doing the same work moves by up to 4x
    from run to run (the kernel's file creation and page cache), while the user
    time stays within about 20%; the fastest run's system time is shown beside
    the median. Context switches per artifact count every switch of the tool's
    processes and threads."""
    print()
    print("| set | protocol | callers/artifact | tool | user CPU-s | system CPU-s, median (least) "
          "| context switches / artifact | vs floor, all CPU | vs floor, user CPU "
          "| vs floor, all CPU: fast runs / slow runs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, count, size, copies, protocol, samples, floor in kinds:
        label = set_label(count, size)
        med = {t: Usage(statistics.median(u.user for _, u in s),
                        statistics.median(u.system for _, u in s),
                        statistics.median(u.switches for _, u in s))
               for t, s in samples.items()}
        least = {t: min(u.system for _, u in s) for t, s in samples.items()}
        floor_all, floor_user = med["curl"].cpu + floor, med["curl"].user + floor
        print(f"| {label} | {protocol} | {copies} | SHA-256 of the bytes (floor's share) "
              f"| {floor:.3f} | | | | | |")
        # Run i of every tool ran at about the same time: a run is fast or slow
        # as curl's CPU-seconds in it are at most or above their median, and
        # each tool's CPU against the floor of its own run is shown for both.
        curl_cpu = [u.cpu for _, u in samples["curl"]]
        fast = [c <= statistics.median(curl_cpu) for c in curl_cpu]
        for tool in [t for t in ("demandflight", "baseline", "curl", "curl+sync") if t in med]:
            u = med[tool]
            ratios = [(run_usage.cpu / (c + floor), is_fast)
                      for (_, run_usage), c, is_fast in zip(samples[tool], curl_cpu, fast)]
            halves = " / ".join(
                f"{statistics.median(r for r, f in ratios if f == want):.2f}x"
                if any(f == want for _, f in ratios) else "-" for want in (True, False))
            name = baseline_name if tool == "baseline" else tool
            print(f"| {label} | {protocol} | {copies} | {name} | {u.user:.2f} "
                  f"| {u.system:.2f} ({least[tool]:.2f}) | {u.switches / count:.2f} "
                  f"| {u.cpu / floor_all:.2f}x | {u.user / floor_user:.2f}x | {halves} |")


if __name__ == "__main__":
    main()
