#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Makes docs/dashboard.png: the panels of packaging/grafana/bulkhead.json with real data.

Grafana is not in Debian, so this draws the dashboard's own queries itself: it starts a built
bulkheadd under load and Debian's Prometheus server scraping it every second on loopback
(tests/packaging/dashboard_stack.py, as ctest packaging.dashboard_queries does), lets the load run
for --seconds, serves scripts/dashboard-screenshot/page.html (uPlot from npm, pinned in its
package.json) which asks that Prometheus' HTTP API for each panel's query, and takes a screenshot
of it with headless Chromium (Debian's `chromium`). The picture is our page, not Grafana: the
layout follows the JSON's gridPos, the series are the panels' queries, and the caption says so.

Usage (after a build; `apt-get install chromium`; npm reaches its registry):
  scripts/dashboard-screenshot.py [--build build] [--seconds 150] [--out docs/dashboard.png]
Not part of `make test`. Every process it starts is stopped by its pid when it ends.
"""

import argparse
import functools
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
sys.path.insert(0, os.path.join(root, "tests", "packaging"))
import dashboard_stack  # noqa: E402

page_dir = os.path.join(here, "dashboard-screenshot")
dashboard_path = os.path.join(root, "packaging", "grafana", "bulkhead.json")
rules_path = os.path.join(root, "packaging", "prometheus", "bulkhead-alerts.yml")


class Handler(http.server.SimpleHTTPRequestHandler):
    """The page's directory, and the dashboard JSON as /bulkhead.json."""

    def translate_path(self, path):
        if path.split("?")[0] == "/bulkhead.json":
            return dashboard_path
        return super().translate_path(path)

    def log_message(self, fmt, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--seconds", type=int, default=150, help="load before the screenshot")
    parser.add_argument("--out", default=os.path.join(root, "docs", "dashboard.png"))
    parser.add_argument("--width", type=int, default=1600)
    args = parser.parse_args()

    if not os.path.isdir(os.path.join(page_dir, "node_modules", "uplot")):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-package-lock"],
                       cwd=page_dir, check=True)
    build = os.path.abspath(args.build)
    with tempfile.TemporaryDirectory(prefix="bulkhead-screenshot-") as tmp, \
            dashboard_stack.running(os.path.join(build, "supervisor", "bulkheadd"),
                                    os.path.join(build, "ctl", "bulkheadctl"),
                                    os.path.join(root, "tests", "e2e", "http_worker.py"),
                                    rules=rules_path, max_load_seconds=args.seconds + 60,
                                    workdir=os.path.join(tmp, "stack")) as (stack, load):
        start = time.time()
        print(f"bulkheadd metrics at {stack.metrics_address}, Prometheus at {stack.prometheus_url}; "
              f"load for {args.seconds} s", flush=True)
        time.sleep(args.seconds)  # a tool, not a test: the graphs need this much history
        end = time.time()

        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=page_dir))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        with open(dashboard_path) as f:
            panels = json.load(f)["panels"]
        height = 60 + max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) * 36
        query = (f"dashboard=/bulkhead.json&prom={stack.prometheus_url}"
                 f"&instance={stack.metrics_address}&start={int(start)}&end={int(end)}&step=2")
        url = f"http://127.0.0.1:{server.server_address[1]}/page.html?{query}"
        chromium = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", f"--user-data-dir={os.path.join(tmp, 'chromium')}",
             "--hide-scrollbars", f"--window-size={args.width},{height}",
             "--virtual-time-budget=30000", f"--screenshot={os.path.abspath(args.out)}", url],
            capture_output=True, text=True, timeout=300)
        server.shutdown()
        if chromium.returncode != 0:
            print(chromium.stdout, chromium.stderr, file=sys.stderr)
            return 1
        load.stop()
        print(f"wrote {args.out} ({args.width}x{height}); load answers: {load.answers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
