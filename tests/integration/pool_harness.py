"""A real gpupool daemon in a subprocess, on a declared inventory, for integration tests.

Stops what it started by PID (never by name): the daemon, then every job supervisor and job
process group recorded in the state directory.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpupool.client import Client


class Pool:
    def __init__(
        self,
        root: Path,
        gpus: str | None = "4xA100-80GB",
        inventory: Path | None = None,
        listen: str | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        self.root = root
        self.args = args  # more `gpupool server` arguments, e.g. ("--database-url", URL)
        self.state_dir = root / "state"
        self.gpus = gpus
        self.inventory = inventory
        self.listen = listen
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.client = Client(self.state_dir)

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["GPUPOOL_STATE_DIR"] = str(self.state_dir)
        env.pop("GPUPOOL_URL", None)
        return env

    def start(self, timeout: float = 30.0) -> Pool:
        cmd = [sys.executable, "-m", "gpupool", "server", "--poll-interval", "0.1"]
        if self.inventory:
            cmd += ["--inventory", str(self.inventory)]
        elif self.gpus:
            cmd += ["--gpus", self.gpus]
        if self.listen:
            cmd += ["--listen", self.listen]
        cmd += self.args
        self.root.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        out = open(self.root / f"daemon-{self.starts}.log", "wb")
        self.proc = subprocess.Popen(
            self.wrap(cmd),
            env=self.daemon_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.started(self.proc.pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}: {self.daemon_log()}")
            try:
                self.client.request("GET", "/healthz")
                return self
            except (ConnectionError, OSError):
                time.sleep(0.05)
        raise TimeoutError(f"daemon did not answer in {timeout}s: {self.daemon_log()}")

    # Hooks for a pool run differently (e.g. with its state on a tmpfs of its own).
    def wrap(self, cmd: list[str]) -> list[str]:
        """The command line that runs the daemon command ``cmd``."""
        return cmd

    def daemon_env(self) -> dict[str, str]:
        return self.env

    def started(self, pid: int) -> None:
        """Called with the daemon's pid as soon as it is spawned."""

    def daemon_log(self) -> str:
        path = self.root / f"daemon-{self.starts}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the daemon: the crash the pool must survive."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def cleanup(self) -> None:
        self.stop()
        self.kill_jobs()

    def kill_jobs(self) -> None:
        """Stop every supervisor and job process group recorded in the state directory."""
        for claim in (self.state_dir / "jobs").glob("*/claim.json"):
            _kill_recorded(claim, "supervisor_pid", group=False)
        for child in (self.state_dir / "jobs").glob("*/child.json"):
            _kill_recorded(child, "pgid", group=True)

    def cli(
        self, *args: str, check: bool = False, timeout: float = 60, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "gpupool", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"gpupool {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def submit(self, *args: str, cwd: Path | None = None) -> int:
        out = self.cli("submit", "--parsable", *args, check=True, cwd=cwd)
        return int(out.stdout.strip())

    def wait(self, job_id: int, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.client.job(job_id)
            if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT"):
                return job
            time.sleep(0.05)
        raise TimeoutError(f"job {job_id} still {job['state']} after {timeout}s")

    def wait_state(self, job_id: int, state: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.client.job(job_id)
            if job["state"] == state:
                return job
            time.sleep(0.05)
        raise TimeoutError(f"job {job_id} is {job['state']}, not {state}, after {timeout}s")


def wait_for(pred: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """The first truthy value of ``pred()``, polled until ``timeout`` seconds have passed."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _kill_recorded(path: Path, key: str, group: bool) -> None:
    try:
        pid = int(json.loads(path.read_text())[key])
    except (OSError, ValueError, KeyError):
        return
    try:
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
