#!/usr/bin/python3
"""Records a real browser's demand stream: a HAR 1.2 file and a DevTools
protocol network log of Chromium reading a local site (docs/cli.md, "Bringing
your own workload").

    scripts/capture/capture.py OUT_DIR [--rate BYTES_PER_S] [--seed N]

It writes a two-page site of random bytes (style, scripts, a font, a JSON
feed, 36 JPEGs of noise, most of them lazy), serves it with nginx on 127.0.0.1 (and
"localhost", a second origin) at --rate bytes per second per connection, and
runs scripts/capture/browse.mjs: Debian's Chromium through playwright-core
(npm), in --visits tabs started 0.7 s apart with the browser's cache off,
opens the long page, scrolls it at a seeded pace, and follows a link before
everything has arrived. Needs the packages chromium, nginx-light, npm and python3-pil; installs
playwright-core into OUT_DIR/.node on first use. Writes OUT_DIR/browse.har and
OUT_DIR/browse.cdp.json.
"""
import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_site(root, rng, port):
    def blob(size):
        return rng.randbytes(size)

    other = f"http://localhost:{port}"
    write(f"{root}/css/site.css", b"body{font-family:Body,sans-serif}\n" +
          b"/*" + b"x" * 60_000 + b"*/\n" +
          b"@font-face{font-family:Body;src:url(../font/body.woff2)}\n")
    write(f"{root}/font/body.woff2", blob(120_000))
    write(f"{root}/js/vendor.js", b"/*" + b"v" * 700_000 + b"*/\nwindow.vendor=1;\n")
    write(f"{root}/js/app.js", b"/*" + b"a" * 250_000 +
          b"*/\nfetch('data/feed.json').then(r=>r.text());\n")
    write(f"{root}/data/feed.json", b'{"items":"' + b"f" * 50_000 + b'"}')
    # Real JPEGs of noise (Chromium stops reading an image it cannot decode).
    from PIL import Image
    images = []
    for i in range(36):
        width, height = 800, rng.randrange(100, 400)
        noise = rng.randbytes(width * height * 3)
        path = f"{root}/img/{i:02d}.jpg"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.frombytes("RGB", (width, height), noise).save(path, quality=92)
        images.append(f"img/{i:02d}.jpg")

    def img(i, lazy):
        host = other + "/" if i % 2 else ""
        loading = ' loading="lazy"' if lazy else ""
        return f'<p>section {i}</p><img src="{host}{images[i]}" width="600" height="400"{loading}>\n'

    head = ('<!doctype html><html><head><meta charset="utf-8">'
            '<link rel="stylesheet" href="css/site.css">'
            '<script src="js/vendor.js" async></script>'
            '<script src="js/app.js" defer></script></head><body>\n')
    page1 = head + "".join(img(i, i >= 4) for i in range(26))
    page1 += '<a id="next" href="page2.html">next</a></body></html>\n'
    page2 = head + "".join(img(i, False) for i in list(range(26, 36)) + [0, 5, 25])
    page2 += "</body></html>\n"
    write(f"{root}/index.html", page1.encode())
    write(f"{root}/page2.html", page2.encode())


def start_nginx(work, root, port, rate):
    prefix = os.path.join(work, "nginx")
    os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
  types {{ text/html html; text/css css; application/javascript js; image/jpeg jpg;
          font/woff2 woff2; application/json json; }}
  access_log {prefix}/logs/access.log;
  client_body_temp_path {prefix}/tmp-body;
  proxy_temp_path {prefix}/tmp-proxy;
  fastcgi_temp_path {prefix}/tmp-fastcgi;
  uwsgi_temp_path {prefix}/tmp-uwsgi;
  scgi_temp_path {prefix}/tmp-scgi;
  add_header Cache-Control "max-age=3600";
  limit_rate {rate};
  server {{ listen 127.0.0.1:{port}; root {root}; }}
}}
""")
    process = subprocess.Popen(["nginx", "-p", prefix, "-c", conf, "-g", "daemon off;"])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    sys.exit("capture.py: nginx did not start")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--rate", type=int, default=150_000,
                        help="bytes per second per connection (nginx limit_rate)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--visits", type=int, default=6, help="tabs, started 0.7 s apart")
    args = parser.parse_args()
    for tool in ("/usr/bin/chromium", "nginx", "npm", "node"):
        if not shutil.which(tool):
            sys.exit(f"capture.py: {tool} is missing (apt-get install chromium nginx-light npm)")
    out = os.path.abspath(args.out)
    node_dir = os.path.join(out, ".node")
    if not os.path.isdir(os.path.join(node_dir, "node_modules", "playwright-core")):
        os.makedirs(node_dir, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", node_dir, "--no-audit", "--no-fund",
                        "playwright-core@1"], check=True, stdout=subprocess.DEVNULL)
    work = os.path.join(out, ".site")
    shutil.rmtree(work, ignore_errors=True)
    port = free_port()
    make_site(os.path.join(work, "www"), random.Random(args.seed), port)
    nginx = start_nginx(work, os.path.join(work, "www"), port, args.rate)
    try:
        env = dict(os.environ, NODE_PATH=os.path.join(node_dir, "node_modules"))
        shutil.copy(os.path.join(HERE, "browse.mjs"), os.path.join(node_dir, "browse.mjs"))
        subprocess.run(["node", os.path.join(node_dir, "browse.mjs"), f"http://127.0.0.1:{port}",
                        os.path.join(out, "browse.har"), os.path.join(out, "browse.cdp.json"),
                        str(args.visits), str(args.seed)],
                       check=True, env=env, timeout=300)
    finally:
        nginx.terminate()
        nginx.wait()
    print(f"capture.py: {out}/browse.har and {out}/browse.cdp.json")


if __name__ == "__main__":
    main()
