"""`/metrics` on a real daemon (issue 14): a real Prometheus server (Debian package
`prometheus`) scrapes it over TCP with an API token, and PromQL through Prometheus's HTTP
query API returns the allocation of a running job; `promtool check metrics` passes on the
exposition; it authenticates like every route (docs/security.md).

Prometheus and promtool are started by path and stopped by PID. Without them the tests skip,
saying how to install them (scripts/system-deps.sh does); under GPUPOOL_REQUIRE_ALL=1 a skip
fails (tests/conftest.py)."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.backends import Databases
from integration.pool_harness import FOREVER, Pool, free_port, wait_for

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MISSING = "(Debian package `prometheus`: `apt-get install prometheus`, or scripts/system-deps.sh)"


def tool(name: str) -> str:
    """The path of `name` (prometheus, promtool), or skip the test saying it is missing
    (asked by a fixture before the daemon's: a skip starts nothing)."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed {MISSING}")
    return path


class Prometheus:
    """A Prometheus server scraping one target every second, in its own session."""

    def __init__(self, root: Path, target: str, token: str) -> None:
        self.root = root
        self.port = free_port()
        root.mkdir(parents=True)
        token_file = root / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        config = {  # JSON is YAML: no YAML writer needed
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "gpupool",
                    "scrape_interval": "1s",
                    "scrape_timeout": "1s",
                    "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
                    "static_configs": [{"targets": [target]}],
                }
            ],
        }
        (root / "prometheus.yml").write_text(json.dumps(config, indent=2))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, binary: str) -> Prometheus:
        log = open(self.root / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={self.root / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.root / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log(self) -> str:
        return (self.root / "prometheus.log").read_text(errors="replace")[-4000:]

    def query(self, promql: str) -> list[dict[str, object]] | None:
        """The instant vector `promql` returns now; None while Prometheus is not answering
        yet (an exited Prometheus fails the test at once, with its log)."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited {self.proc.returncode}: {self.log()}")
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": promql}
        )
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = json.load(answer)
        except OSError:
            return None
        assert body["status"] == "success", body
        result: list[dict[str, object]] = body["data"]["result"]
        return result


@pytest.fixture
def prometheus_binary() -> str:
    return tool("prometheus")


@pytest.fixture
def promtool_binary() -> str:
    return tool("promtool")


@pytest.fixture
def tcp_pool(tmp_path: Path, databases: Databases) -> Iterator[Pool]:
    pool = Pool(
        tmp_path / "pool",
        listen=f"127.0.0.1:{free_port()}",
        args=("--sample-interval", "0.2s"),
        database_url=databases.new_url(),
    ).start()
    try:
        yield pool
    finally:
        pool.cleanup()


def test_prometheus_scrapes_the_daemon_and_promql_finds_a_running_jobs_gpus(
    tmp_path: Path, prometheus_binary: str, tcp_pool: Pool
) -> None:
    pool = tcp_pool
    job = pool.submit("--gpus", "2", "--name", "prom-test", "--", *FOREVER)
    pool.wait_state(job, "RUNNING")
    prometheus = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{pool.port}", pool.token())
    prometheus.start(prometheus_binary)
    try:

        def allocation() -> list[dict[str, object]] | None:
            return prometheus.query(f'gpupool_job_allocated_gpus{{job_id="{job}"}}')

        # Prometheus's first samples are queryable after a few seconds (seen: about 8 s on
        # the 2-core machine); a busy machine may take longer.
        (series,) = wait_for(allocation, 90, f"Prometheus to have job {job}'s allocation")
        assert series["value"][1] == "2"  # type: ignore[index]
        labels = series["metric"]
        assert isinstance(labels, dict)
        assert (labels["name"], labels["project"]) == ("prom-test", "default")
        assert labels["job"] == "gpupool"  # Prometheus's own scrape job
        # The scrape itself succeeded with the token, and the GPUs add up.
        (up,) = prometheus.query('up{job="gpupool"}') or [{}]
        assert up["value"][1] == "1", prometheus.log()  # type: ignore[index]
        (held,) = wait_for(
            lambda: prometheus.query("sum(gpupool_gpu_allocated_ratio)"), 30, "the GPU sum"
        )
        assert held["value"][1] == "2"  # type: ignore[index]
    finally:
        prometheus.stop()
        pool.cancel(job)


@pytest.mark.backend_independent
def test_metrics_authenticate_like_every_route_and_pass_promtool(
    tmp_path: Path, promtool_binary: str, tcp_pool: Pool
) -> None:
    pool = tcp_pool
    job = pool.submit("--gpus", "1", "--", *FOREVER)
    pool.wait_state(job, "RUNNING")
    pool.submit("--gpus", "4", "--", *FOREVER)  # waits: the other holds a GPU

    # The Unix socket: the kernel names the caller, no token. The figures are the engine's
    # last published view: `show` (wait_state) reads the store, which the view can trail
    # by a round on a busy machine, so the two jobs are waited for (CI beside a CPU hog).
    def scraped() -> tuple[int, dict[str, str], str] | None:
        status, headers, body = pool.client.request_raw("GET", "/metrics")
        text = body.decode()
        both = f'job_id="{job}"' in text and 'gpupool_jobs{state="pending"} 1.0' in text
        return (status, headers, text) if status != 200 or both else None

    status, headers, text = wait_for(scraped, 30, "/metrics to show both jobs")
    assert status == 200, text
    assert headers["content-type"] == CONTENT_TYPE

    # TCP: a token, or 401 as for any route (a bad token is judged alone: 401 even from this
    # machine, where a client without one is its socket's owner, api/loopback.py); the Host
    # a Prometheus sends (its target) passes, a name that is not this server's is refused
    # (DNS rebinding), token or not.
    token, target = pool.token(), f"127.0.0.1:{pool.port}"
    status, body = _tcp_get(pool.port, target, token)
    assert status == 200 and b"gpupool_gpu_allocated_ratio" in body, body
    status, body = _tcp_get(pool.port, target, "gpupool_1_not-the-secret")
    assert status == 401 and b"unauthenticated" in body, body
    status, body = _tcp_get(pool.port, target, None)
    assert status == 200, body  # this machine: the socket's owner
    status, body = _tcp_get(pool.port, "evil.example", token)
    assert status == 421 and b"wrong_host" in body, body

    exposition = tmp_path / "metrics.txt"
    exposition.write_text(text)
    with exposition.open() as stdin:
        checked = subprocess.run(
            [promtool_binary, "check", "metrics"],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "" and checked.stderr.strip() == "", checked


def _tcp_get(port: int, host: str, token: str | None) -> tuple[int, bytes]:
    """(status, whole answer) of GET /metrics over TCP, with this Host and this token (none:
    no Authorization header, whatever token the environment would give a client)."""
    head = ["GET /metrics HTTP/1.1", f"Host: {host}", "Connection: close"]
    if token is not None:
        head.append(f"Authorization: Bearer {token}")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return int(answer.split()[1]), answer
