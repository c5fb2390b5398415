"""`gpupool notebook`: Jupyter as an interactive pool job, on a free port with a token.

The job runs JupyterLab when it is installed (`pip install 'gpupool[notebook]'`), else the
bare Jupyter Server (its REST API and any front end you point at it), on 127.0.0.1 of this
machine with the GPUs it was given. Interactive jobs are not preemptible and have their own
priority class; this one is culled when idle (`--idle-timeout`, default 1h): kernels idle that
long are shut down by Jupyter (a kernel busy computing, on the GPU or not, is never idle),
and the job's main process (cli/notebook_cull.py) stops the server once it had no busy kernel
and no activity for that long; the job then ends and its GPUs go back to the pool.

The token is this command's (random) and reaches the server in its environment
(JUPYTER_TOKEN), never on its command line, which every user of the machine can see with ps;
the pool shows a job's environment to its owner and admins only. The URL printed is the one
the server logs once it listens.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import socket
import sys
import time
from typing import TYPE_CHECKING

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.session_advice import add_preemptible_flag, submit_session

if TYPE_CHECKING:
    from gpupool.client import Client

URL_RE = re.compile(rb"(http://127\.0\.0\.1:\d+/\S*)")
START_S = 120.0  # from RUNNING to the server's URL in its log


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "notebook",
        parents=[parents.common],
        help="Jupyter as an interactive job with GPUs; prints its URL (culled when idle)",
    )
    p.add_argument("--gpus", default="1", help="GPUs (default 1; 0.5 shares one by memory)")
    p.add_argument("--gpu-type", help="GPU model, e.g. A100-80GB")
    p.add_argument("--gpu-memory", help="share one GPU: this much of its memory, e.g. 20GB")
    p.add_argument("--time", help="time limit, e.g. 8h (default: the pool's)")
    p.add_argument("--project", help="project (team) to charge")
    p.add_argument("--name", default="notebook", help="job name (default: notebook)")
    p.add_argument(
        "--idle-timeout",
        default="1h",
        metavar="DURATION",
        help="stop after this long without kernel or server activity (default 1h)",
    )
    p.add_argument("--workdir", help="the notebooks' directory (default: here)")
    add_preemptible_flag(p, "Jupyter is stopped and requeued, and starts again when GPUs free up")
    p.set_defaults(handler=OnPool(cmd_notebook))


def jupyter_command(port: int, idle_s: float, root: str) -> list[str]:
    """The job's command line: the culler (cli/notebook_cull.py) around JupyterLab if
    importable here, else Jupyter Server, on `port` (taken: the server fails, and says so)."""
    import importlib.util

    app = "jupyterlab" if importlib.util.find_spec("jupyterlab") else "jupyter_server"
    every = max(1, min(60, int(idle_s // 4)))
    cull = [sys.executable, "-m", "gpupool.cli.notebook_cull", "--idle-timeout", f"{idle_s:g}"]
    return [
        *cull, "--port", str(port), "--",
        sys.executable, "-m", app, "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        f"--MappingKernelManager.cull_idle_timeout={int(idle_s)}",
        f"--MappingKernelManager.cull_interval={every}",
        "--MappingKernelManager.cull_connected=True",
        f"--TerminalManager.cull_inactive_timeout={int(idle_s)}",
        f"--TerminalManager.cull_interval={every}",
        # The job runs as its submitter (shared mode) or as the daemon's user, this one:
        # root only when root submits, who was told what it means by Jupyter's refusal.
        *(["--allow-root"] if os.geteuid() == 0 else []),
    ]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cmd_notebook(client: Client, args: argparse.Namespace) -> int:
    import importlib.util

    from gpupool.cli.submit import build_wire_spec, spec_error_text
    from gpupool.core.units import parse_duration
    from gpupool.spec import SpecError

    if not importlib.util.find_spec("jupyter_server"):
        print(
            "gpupool: Jupyter is not installed: pip install 'gpupool[notebook]' "
            "(JupyterLab), or jupyter-server",
            file=sys.stderr,
        )
        return 2
    try:
        idle_s = parse_duration(args.idle_timeout)
    except ValueError as exc:
        print(f"gpupool: --idle-timeout: {exc}", file=sys.stderr)
        return 2
    root = os.path.abspath(args.workdir or os.getcwd())
    token = secrets.token_hex(24)
    spec = argparse.Namespace(
        gpus=args.gpus, gpu_type=args.gpu_type, gpu_memory=args.gpu_memory, time=args.time,
        project=args.project, name=args.name, priority="interactive", workdir=root,
        preemptible=args.preemptible,
        command=jupyter_command(free_port(), idle_s, root), spec_file=None,
        env=[f"JUPYTER_TOKEN={token}"],
    )  # fmt: skip
    try:
        wire = build_wire_spec(spec)
    except SpecError as exc:
        print(spec_error_text(exc, None), file=sys.stderr)
        return 2
    job = submit_session(client, wire, "notebook")
    if job is None:
        return 2
    print(f"gpupool: job {job.id} queued: Jupyter with {args.gpus} GPU(s)", file=sys.stderr)
    try:
        url = _server_url(client, job.id)
    except KeyboardInterrupt:
        client.cancel(job.id)
        print(f"\ngpupool: job {job.id} cancelled", file=sys.stderr)
        return 130
    if url is None:
        from gpupool.cli.jobs import final_line

        now = client.job(job.id)
        if now.state.terminal:
            said = final_line(now)
        else:
            said = f"Jupyter printed no URL within {START_S:.0f} s; job {job.id} still runs"
        print(f"gpupool: {said}; see gpupool logs {job.id}", file=sys.stderr)
        return 1
    base = url.split("?", 1)[0].rstrip("/")
    print(f"{base}/?token={token}")
    print(
        f"gpupool: job {job.id}; stopped after {args.idle_timeout} idle, or with "
        f"gpupool cancel {job.id}",
        file=sys.stderr,
    )
    return 0


def _server_url(client: Client, job_id: int) -> str | None:
    """The URL the server printed in the job's log; None if the job ended first."""
    offset, seen, deadline = 0, b"", None
    while True:
        chunk = client.log(job_id, offset)
        offset, seen = chunk.offset, (seen + chunk.data)[-65536:]
        found = URL_RE.search(seen)
        if found:
            return found.group(1).decode()
        job = client.job(job_id)
        if job.state.terminal:
            return None
        if job.state.value == "RUNNING":
            deadline = deadline or time.monotonic() + START_S
            if time.monotonic() > deadline:
                return None
        time.sleep(0.2)
