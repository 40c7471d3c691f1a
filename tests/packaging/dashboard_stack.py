# SPDX-License-Identifier: MIT
"""A real bulkheadd under load, scraped by Debian's Prometheus server on loopback.

Used by tests/packaging/dashboard_test.py (ctest packaging.dashboard_queries) and by
scripts/dashboard-screenshot.py (docs/metrics.md, "Dashboard and alerts"). Everything listens on
127.0.0.1 only, on ports the kernel picks (bulkheadd: port 0, read back from `status --json`;
Prometheus: a port found free just before it starts, tried again on a bind failure), and lives in
one temporary directory (the config, the runtime_dir, Prometheus' --storage.tsdb.path). Every
process started here is stopped by its pid in close(): SIGTERM, then SIGKILL after a deadline.

Cells (cgroup = "off": the host's /sys/fs/cgroup is never written; the cgroup families are checked
in the VM test vm.containers instead):
  api    protocol "http", 2 slots and 4 queue places, queue_timeout 300ms, memory_max set (not in
         force without a cgroup, so bulkhead_cell_limit_enforced has a 0 sample)
  flaky  protocol "http", without a start limit: each GET /exit ends its worker, which is started
         again after a backoff (restarts by reason "crash", requests failed worker_died)
The load (Load) is bounded in time and requests: 7 clients on api (GET /sleep/MS: some run, some
queue, some are rejected full) and one on flaky that makes its worker exit about once a second.
"""

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import http.client
import urllib.error
import urllib.parse
import urllib.request

SCRAPE_INTERVAL_S = 1


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout_s, what):
    """Polls `condition` until it returns a true value, or raises TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        time.sleep(0.1)


def _tail(path, lines=20):
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def _stop(proc, timeout_s=10):
    """Stops one process we started, by its pid: SIGTERM, SIGKILL after `timeout_s`."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class QueryError(RuntimeError):
    """Prometheus refused a query (its errorType and error)."""


class Stack:
    """bulkheadd + Prometheus. Use as a context manager; close() stops both."""

    def __init__(self, bulkheadd, bulkheadctl, http_worker, rules=None, prometheus="prometheus",
                 workdir=None):
        self.owns_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix="bulkhead-dashboard-")
        os.makedirs(self.dir, exist_ok=True)
        self.bulkheadctl = bulkheadctl
        self.daemon = None
        self.prometheus = None
        self.daemon_log = self.prometheus_log = None
        try:
            self._start(bulkheadd, http_worker, rules, prometheus)
        except BaseException:
            self.close()
            raise

    def _start(self, bulkheadd, http_worker, rules, prometheus):
        self.runtime_dir = os.path.join(self.dir, "run")
        config = os.path.join(self.dir, "bulkhead.toml")
        worker = json.dumps(["/usr/bin/python3", os.path.abspath(http_worker)])
        with open(config, "w") as f:
            f.write(f"""[supervisor]
runtime_dir = "{self.runtime_dir}"
metrics_listen = "127.0.0.1:0"
cgroup = "off"

[cells.api]
command = {worker}
protocol = "http"
listen = ["127.0.0.1:0"]
max_concurrent = 2
max_queue = 4
queue_timeout = "300ms"
memory_max = "256M"
stop_timeout = "1s"

[cells.flaky]
command = {worker}
protocol = "http"
listen = ["127.0.0.1:0"]
max_concurrent = 1
restart_delay = "200ms"
restart_max_delay = "2s"
start_limit_interval = "0s"
stop_timeout = "1s"
""")
        self.daemon_log = open(os.path.join(self.dir, "bulkheadd.log"), "w")
        self.daemon = subprocess.Popen([bulkheadd, "--config", config], stdout=self.daemon_log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        try:
            status = wait_for(self._running_status, 60, "bulkheadd's cells running")
        except TimeoutError as e:
            raise TimeoutError(f"{e}: {self.status()}\n{_tail(self.daemon_log.name)}") from None
        self.metrics_address = status["supervisor"]["metrics_listen"]
        self.cell_address = {c["name"]: c["listen"][0] for c in status["cells"]}

        self.prometheus_log = open(os.path.join(self.dir, "prometheus.log"), "w")
        prom_config = os.path.join(self.dir, "prometheus.yml")
        with open(prom_config, "w") as f:
            f.write(f"""global:
  scrape_interval: {SCRAPE_INTERVAL_S}s
  evaluation_interval: {SCRAPE_INTERVAL_S}s
rule_files: [{json.dumps(os.path.abspath(rules)) if rules else ""}]
scrape_configs:
  - job_name: bulkhead
    static_configs:
      - targets: ["{self.metrics_address}"]
""")
        for attempt in range(5):
            port = _free_port()
            self.prometheus_url = f"http://127.0.0.1:{port}"
            self.prometheus = subprocess.Popen(
                [prometheus, f"--config.file={prom_config}",
                 f"--storage.tsdb.path={os.path.join(self.dir, 'tsdb')}",
                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                stdout=self.prometheus_log, stderr=subprocess.STDOUT, start_new_session=True)
            wait_for(lambda: self.prometheus.poll() is not None or self._ready(), 60,
                     "prometheus ready")
            if self.prometheus.poll() is None:
                break
            # Another process took the port between _free_port() and the bind: take another.
            self.prometheus = None
        else:
            raise RuntimeError("prometheus did not start:\n" + _tail(self.prometheus_log.name))

    # --- bulkheadd ----------------------------------------------------------------------------
    def status(self):
        out = subprocess.run(
            [self.bulkheadctl, "--socket", os.path.join(self.runtime_dir, "control.sock"),
             "status", "--json"], capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def _running_status(self):
        if self.daemon.poll() is not None:
            raise RuntimeError("bulkheadd exited:\n" + _tail(self.daemon_log.name))
        status = self.status()
        if status and all(c["state"] == "running" for c in status["cells"]):
            return status
        return None

    # --- Prometheus ---------------------------------------------------------------------------
    def _ready(self):
        try:
            with urllib.request.urlopen(self.prometheus_url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path, **params):
        """GET /api/v1/PATH?params; the `data` member of the answer (raises on an error)."""
        url = f"{self.prometheus_url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                answer = json.load(r)
        except urllib.error.HTTPError as e:  # 400 and 422 carry the error in a JSON body
            answer = json.load(e)
        if answer.get("status") != "success":
            raise QueryError(f"{params}: {answer.get('errorType')}: {answer.get('error')}")
        return answer["data"]

    def query(self, expr):
        """The instant query API at the current time: the result vector (a list of samples)."""
        return self.api("query", query=expr)["result"]

    def close(self, keep_dir=False):
        """Stops Prometheus and bulkheadd; removes the temporary directory unless asked not to."""
        _stop(self.prometheus)
        _stop(self.daemon)
        for log in (self.prometheus_log, self.daemon_log):
            if log:
                log.close()
        if self.owns_dir and not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Load:
    """Clients of the stack's cells on threads, until stop() or `max_seconds` pass."""

    def __init__(self, stack, max_seconds=120, api_clients=7):
        self.stack = stack
        self.deadline = time.monotonic() + max_seconds
        self.stopping = threading.Event()
        self.answers = {}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._api_client, args=(i,), daemon=True)
                        for i in range(api_clients)]
        self.threads.append(threading.Thread(target=self._flaky_client, daemon=True))
        for t in self.threads:
            t.start()

    def _running(self):
        return not self.stopping.is_set() and time.monotonic() < self.deadline

    def _get(self, cell, path):
        host, port = self.stack.cell_address[cell].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            conn.request("GET", path)
            status = conn.getresponse().status
        except (OSError, http.client.HTTPException):
            status = "error"
        finally:
            conn.close()
        with self.lock:
            self.answers[(cell, status)] = self.answers.get((cell, status), 0) + 1

    def _api_client(self, i):
        rng = random.Random(i)
        while self._running():
            # Bursts and pauses, so that the queue fills and drains.
            self._get("api", f"/sleep/{rng.choice((5, 20, 60, 120))}")
            if rng.random() < 0.1:
                self.stopping.wait(rng.uniform(0.05, 0.3))

    def _flaky_client(self):
        n = 0
        while self._running():
            n += 1
            self._get("flaky", "/exit" if n % 20 == 0 else "/hello")
            self.stopping.wait(0.05)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(30)


@contextlib.contextmanager
def running(bulkheadd, bulkheadctl, http_worker, rules=None, max_load_seconds=120, workdir=None):
    """A Stack with its Load; both stopped on exit."""
    with Stack(bulkheadd, bulkheadctl, http_worker, rules=rules, workdir=workdir) as stack:
        load = Load(stack, max_seconds=max_load_seconds)
        try:
            yield stack, load
        finally:
            load.stop()
