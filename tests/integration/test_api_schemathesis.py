"""Schemathesis over the daemon's own OpenAPI schema, against a real daemon (real routes,
real store) over TCP, as a pool admin: no request it generates gets a server error (5xx), and the daemon
logs no traceback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from integration.pool_harness import Pool, free_port


def test_no_generated_request_gets_a_server_error(tmp_path: Path) -> None:
    port = free_port()
    pool = Pool(tmp_path / "pool", listen=f"127.0.0.1:{port}").start()
    try:
        st = Path(os.environ.get("VIRTUAL_ENV", "")) / "bin" / "st"
        if not st.exists():
            import sys

            st = Path(sys.executable).parent / "st"
        # As a pool admin with an API token, so that every route's handler runs (without
        # one, every /v1 route answers 401 before its handler).
        auth = f"Authorization: Bearer {pool.token()}"
        run = subprocess.run(
            [str(st), "run", f"http://127.0.0.1:{port}/openapi.json", "-H", auth]
            + ["--checks", "not_a_server_error", "--max-examples", "15", "--workers", "1"]
            + ["--request-timeout", "30"],
            capture_output=True,
            text=True,
            timeout=560,
            cwd=tmp_path,  # schemathesis may write its cassettes and reports here
        )
        assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
        assert "Traceback" not in pool.daemon_log(), pool.daemon_log()[-4000:]
    finally:
        pool.cleanup()
