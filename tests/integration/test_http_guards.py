"""What a web page, a wrong name or a busy script can do to a daemon on TCP (issue 13:
`Host: evil.example` got 200, a cross-origin text/plain POST cancelled a job, `--listen
0.0.0.0` started without a word, there was no TLS and no rate limit)."""

from __future__ import annotations

import getpass
import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpupool.client import ApiError, Client
from integration.pool_harness import FOREVER, Pool, free_port


@pytest.fixture(scope="module")
def tcp_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    port = free_port()
    pool = Pool(
        tmp_path_factory.mktemp("guards") / "pool",
        listen=f"127.0.0.1:{port}",
        args=("--server-name", "pool.example,other.example", "--submit-rate", "0"),
    ).start()
    try:
        yield pool
    finally:
        pool.cleanup()


def _http(
    pool: Pool, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, dict[str, object]]:
    lines = [f"{method} {path} HTTP/1.1", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", pool.port), timeout=30) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:{port}", "localhost.evil.example:{port}", "localhost:x", ""],
)
def test_a_host_that_is_not_this_server_is_refused(tcp_pool: Pool, host: str) -> None:
    status, answer = _http(tcp_pool, "GET", "/v1/jobs", {"Host": host.format(port=tcp_pool.port)})
    assert status in (400, 421), answer
    if status == 421:
        assert answer["error"] == "wrong_host"
        assert "--server-name" in str(answer["message"]), answer


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:{port}",
        "localhost:{port}",
        "LOCALHOST",
        "[::1]:{port}",
        "pool.example:{port}",
        "other.example",
        "localhost:9000",  # an ssh tunnel's or a proxy's port
        socket.gethostname(),
    ],
)
def test_the_names_of_this_server_are_answered(tcp_pool: Pool, host: str) -> None:
    # /healthz: the one route that needs no API token, so only the Host check can refuse.
    status, answer = _http(tcp_pool, "GET", "/healthz", {"Host": host.format(port=tcp_pool.port)})
    assert status == 200, answer


def test_the_unix_socket_answers_any_host(tcp_pool: Pool) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(tcp_pool.client.socket))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data[:200]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]
)
def test_a_cross_site_post_cannot_cancel_a_job(tcp_pool: Pool, content_type: str | None) -> None:
    job = tcp_pool.submit("--", *FOREVER)
    try:
        headers = {"Host": f"127.0.0.1:{tcp_pool.port}", "Origin": "http://evil.example"}
        if content_type:
            headers["Content-Type"] = content_type
        body = json.dumps({"user": getpass.getuser()}).encode()
        status, answer = _http(tcp_pool, "POST", f"/v1/jobs/{job}/cancel", headers, body)
        assert status == 415, answer
        assert "application/json" in str(answer["message"])
        assert tcp_pool.client.job(job).state.value in ("PENDING", "RUNNING")
    finally:
        tcp_pool.cancel(job)


def test_the_client_cancels_over_tcp(tcp_pool: Pool) -> None:
    remote = Client(url=f"http://127.0.0.1:{tcp_pool.port}", token=tcp_pool.token())
    job = tcp_pool.submit("--", *FOREVER)
    assert remote.cancel(job).id == job
    tcp_pool.wait(job)


def test_submissions_past_the_rate_limit_are_429_with_retry_after(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", args=("--submit-rate", "0.01", "--submit-burst", "2")).start()
    try:
        for _ in range(2):
            pool.submit("--", "true")
        status, headers, data = pool.client.request_raw(
            "POST", "/v1/jobs", {"spec": {"command": ["true"]}, "user": "u"}
        )
        answer = json.loads(data)
        assert status == 429, answer
        assert answer["error"] == "rate_limited"
        assert int(headers["retry-after"]) >= 1
        assert "0.01 jobs a second after a burst of 2" in answer["message"], answer
        assert "retry in" in answer["message"]
        cli = pool.cli("submit", "--", "true")
        assert cli.returncode != 0
        assert "too many submissions" in cli.stderr and "retry in" in cli.stderr, cli.stderr
        with pytest.raises(ApiError) as caught:
            pool.client.submit({"command": ["true"]}, uuid.uuid4().hex)
        assert caught.value.status == 429
    finally:
        pool.cleanup()


def _server(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpupool", "server", "--gpus", "1xA100-80GB"]
        + ["--state-dir", str(state), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_listening_beyond_loopback_without_tls_is_refused(tmp_path: Path, host: str) -> None:
    state = tmp_path / "state"
    listen = f"[{host}]:{free_port()}" if ":" in host else f"{host}:{free_port()}"
    done = _server("--listen", listen, state=state)
    assert done.returncode == 2, done.stderr
    assert "clear text" in done.stderr and "--insecure-listen" in done.stderr, done.stderr
    assert "--tls-cert" in done.stderr
    assert not state.exists()  # refused before anything was written


def test_insecure_listen_starts_beyond_loopback(tmp_path: Path) -> None:
    port = free_port()
    pool = Pool(tmp_path / "pool", listen=f"0.0.0.0:{port}", args=("--insecure-listen",)).start()
    try:
        assert Client(url=f"http://127.0.0.1:{port}").request("GET", "/healthz")
    finally:
        pool.cleanup()


def _self_signed(where: Path) -> tuple[Path, Path]:
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_tls_serves_https_to_a_client_given_the_ca(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    port = free_port()
    pool = Pool(
        tmp_path / "pool",
        listen=f"0.0.0.0:{port}",  # beyond loopback: TLS makes that allowed
        args=("--tls-cert", str(cert), "--tls-key", str(key)),
    ).start()
    try:
        url = f"https://127.0.0.1:{port}"
        token = pool.token()
        job = Client(url=url, ca_file=str(cert), token=token).submit({"command": ["true"]}, "t-1")
        assert pool.wait(job.id).state.value == "SUCCEEDED"
        env = {**pool.env, "GPUPOOL_URL": url, "GPUPOOL_CA_CERT": str(cert), "GPUPOOL_TOKEN": token}
        queue = subprocess.run(
            [sys.executable, "-m", "gpupool", "queue", "-a"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert queue.returncode == 0, queue.stderr
        assert str(job.id) in queue.stdout
        env.pop("GPUPOOL_CA_CERT")
        unknown = subprocess.run(
            [sys.executable, "-m", "gpupool", "queue"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert unknown.returncode == 1
        assert "certificate" in unknown.stderr and "GPUPOOL_CA_CERT" in unknown.stderr, (
            unknown.stderr
        )
        # Plain HTTP to the TLS port gets no answer from the API.
        with pytest.raises(OSError):
            Client(url=f"http://127.0.0.1:{port}", timeout=10).request("GET", "/healthz")
        info = pool.client.info()
        assert info.url is not None and info.url.startswith("https://"), info
    finally:
        pool.cleanup()


def test_plain_http_to_a_tls_listener_is_told_to_use_https(tmp_path: Path) -> None:
    """`--url http://...` pointed at a listener that serves TLS: the daemon's TLS handshake
    refuses the plain request and the connection closes with no HTTP answer. The client tells
    the user to use https://, not only that the connection was dropped (issue 30, item 15)."""
    cert, key = _self_signed(tmp_path)
    port = free_port()
    pool = Pool(
        tmp_path / "pool",
        listen=f"127.0.0.1:{port}",
        args=("--tls-cert", str(cert), "--tls-key", str(key)),
    ).start()
    try:
        env = {**pool.env, "GPUPOOL_URL": f"http://127.0.0.1:{port}"}
        env["GPUPOOL_TOKEN"] = pool.token()
        for args in (["queue"], ["submit", "--", "true"]):
            done = subprocess.run(
                [sys.executable, "-m", "gpupool", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 1, (args, done.stderr)
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1, done.stderr
            assert f"use https://127.0.0.1:{port}" in lines[0], lines[0]
        assert pool.client.job_page(include_finished=True, limit=1).total == 0
    finally:
        pool.cleanup()


def test_a_tls_key_that_does_not_load_is_refused_at_start(tmp_path: Path) -> None:
    cert, _ = _self_signed(tmp_path)
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key\n")
    done = _server(
        "--listen", f"127.0.0.1:{free_port()}", "--tls-cert", str(cert), "--tls-key", str(bad),
        state=tmp_path / "state",
    )  # fmt: skip
    assert done.returncode == 2
    assert "--tls-key" in done.stderr and "cannot be used" in done.stderr, done.stderr
