"""The main process of a `gpupool notebook` job: runs the Jupyter server and stops it once
it has been idle for the timeout, so the job ends and its GPUs go back to the pool.

Idle: no kernel busy (a cell computing, on the GPU or not, is activity) and the server's own
last activity (requests, kernel and terminal messages; Jupyter's /api/status, which our
asking does not move) older than the timeout. Asked every few seconds: Jupyter's own
`shutdown_no_activity_timeout` looks once a minute only. Stdlib only; the token comes from
the environment (JUPYTER_TOKEN), as the server's does.

    python -m gpupool.cli.notebook_cull --idle-timeout 3600 --port 8888 -- JUPYTER ARGS...
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime


def idle_since(base: str, token: str, now: float) -> float | None:
    """When the server was last active (epoch seconds: now if a kernel is busy); None when
    it does not answer (starting, or gone)."""
    headers = {"Authorization": f"token {token}"}
    try:
        status = _get(f"{base}/api/status", headers)
        kernels = _get(f"{base}/api/kernels?no_track_activity=1", headers)
    except (OSError, urllib.error.URLError, ValueError):
        return None
    if isinstance(kernels, list) and any(k.get("execution_state") == "busy" for k in kernels):
        return now
    last = status.get("last_activity") if isinstance(status, dict) else None
    if not isinstance(last, str):
        return None
    return datetime.fromisoformat(last.replace("Z", "+00:00")).timestamp()


def _get(url: str, headers: dict[str, str]) -> object:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 (our own server)
        return json.loads(answer.read())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="notebook_cull")
    p.add_argument("--idle-timeout", type=float, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    token = os.environ.get("JUPYTER_TOKEN", "")
    base = f"http://127.0.0.1:{args.port}"
    server = subprocess.Popen(command)

    def forward(signum: int, _frame: object) -> None:
        server.send_signal(signum)  # a cancel: the server stops, then so do we

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    every = max(0.5, min(5.0, args.idle_timeout / 4))
    while True:
        try:
            return server.wait(timeout=every)
        except subprocess.TimeoutExpired:
            pass
        now = time.time()
        last = idle_since(base, token, now)
        if last is not None and now - last > args.idle_timeout:
            print(
                f"[gpupool] Jupyter idle for over {args.idle_timeout:g} s (no busy kernel, "
                "no activity): stopping it, the job ends and its GPUs go back to the pool",
                flush=True,
            )
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            return 0


if __name__ == "__main__":
    sys.exit(main())
