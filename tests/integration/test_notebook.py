"""`gpupool notebook` (issue 15) against a real daemon and a real Jupyter Server: the URL it
prints reaches the server's API with its token (and not without), the job is interactive,
and it is culled after a short idle timeout."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from integration.pool_harness import Pool


def test_a_notebook_prints_its_url_answers_with_the_token_and_is_culled_when_idle(
    tmp_path: Path,
) -> None:
    pytest.importorskip("jupyter_server", reason="jupyter-server is in the test extra")
    pool = Pool(tmp_path / "pool").start()
    try:
        started = pool.cli("notebook", "--idle-timeout", "3s", "--workdir", str(tmp_path),
                           check=True, timeout=120)  # fmt: skip
        url = started.stdout.strip()
        assert url.startswith("http://127.0.0.1:") and "/?token=" in url, started
        base, token = url.split("/?token=")
        with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=10) as answer:
            assert json.loads(answer.read())["kernels"] == 0
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/api/status", timeout=10)
        assert refused.value.code == 403
        (job,) = pool.client.jobs()
        assert (job.name, job.priority_name, job.preemptible) == ("notebook", "interactive", False)
        assert token not in " ".join(job.command)  # the token travels in the environment
        ended = pool.wait(job.id, timeout=90)
        assert ended.state.value == "SUCCEEDED"
        assert "[gpupool] Jupyter idle for over 3 s" in pool.log(job.id)
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
    finally:
        pool.cleanup()


def test_a_bad_idle_timeout_is_refused(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool").start()
    try:
        refused = pool.cli("notebook", "--idle-timeout", "soon")
        assert refused.returncode == 2 and "--idle-timeout" in refused.stderr, refused
        assert pool.client.jobs() == ()
    finally:
        pool.cleanup()


def test_the_culler_counts_a_busy_kernel_as_activity() -> None:
    """Against a small HTTP server answering as Jupyter's API does (a real kernel needs
    ipykernel, which only the notebook extra installs)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from gpupool.cli.notebook_cull import idle_since

    kernels = [{"execution_state": "idle"}]

    class Jupyter(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            ok = self.headers.get("Authorization") == "token secret"
            body = {"last_activity": "2026-01-01T00:00:00.000000Z"}
            answer = kernels if self.path.startswith("/api/kernels") else body
            self.send_response(200 if ok else 403)
            self.end_headers()
            self.wfile.write(json.dumps(answer).encode())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Jupyter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert idle_since(base, "secret", 5e9) == 1767225600.0  # the server's last activity
        kernels[0]["execution_state"] = "busy"
        assert idle_since(base, "secret", 5e9) == 5e9  # computing: active now
        assert idle_since(base, "wrong", 5e9) is None  # no answer it can read
    finally:
        server.shutdown()
    assert idle_since(base, "secret", 5e9) is None  # gone
