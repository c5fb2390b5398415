"""A tiny real backend for the daemon-level tests of backends (tests only; never in src/).

It runs each job's command as a local subprocess under its own run names
(`core.backends.run_name`), through a runner process per run that waits, QUEUED, until the
backend's gate file (`<state_dir>/open`) exists, as a run waits in Slurm's queue for
resources. Its state is files under the BackendContext's state_dir, so a restarted daemon
finds its runs again (`adopt`). `<state_dir>/down` makes it unreachable: every poll answers
UNKNOWN. Stopped by PID only (`runner.pid`, `job.pid`): `kill_runs`.

`python subprocess_backend.py run RUNDIR` is the runner.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from gpupool.core.backends import Backend, BackendContext, BackendHealth, BackendKind, run_name
from gpupool.core.containers import ContainerEngine
from gpupool.core.execution import (
    Capabilities,
    ExitReason,
    ExitRecord,
    Handle,
    LaunchRequest,
    Leftovers,
    LogChunk,
    Observation,
    RunState,
    StopKind,
)


class SubprocessBackend:
    def __init__(self, name: str, context: BackendContext) -> None:
        self._name = name
        self.pool_id = context.pool_id
        self.root = context.state_dir
        self.root.mkdir(parents=True, exist_ok=True)
        self.poll_calls = 0  # one call per poll for all runs, counted in the daemon's log

    @property
    def name(self) -> str:
        return self._name

    @property
    def kind(self) -> BackendKind:
        return BackendKind.SLURM  # a stand-in under a real kind's name (the registry's)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(adopts_after_restart=True)

    def health(self) -> BackendHealth:
        if (self.root / "down").exists():
            return BackendHealth(False, "down (test)")
        return BackendHealth(True, f"subprocess backend at {self.root}")

    def container_engines(self) -> Sequence[ContainerEngine]:
        return ()

    def _dir(self, handle: Handle) -> Path:
        return self.root / "runs" / run_name(self.pool_id, handle)

    def launch(self, request: LaunchRequest) -> None:
        run = self._dir(request.handle)
        if run.exists():
            return  # idempotent: the run started under this handle is left as it is
        run.mkdir(parents=True)
        spec = {
            "command": list(request.command),
            "env": dict(request.env),
            "workdir": request.workdir or str(self.root),
            "gate": str(self.root / "open"),
        }
        (run / "request.json").write_text(json.dumps(spec))
        proc = subprocess.Popen(
            [sys.executable, __file__, "run", str(run)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        (run / "runner.pid").write_text(str(proc.pid))

    def poll(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        self.poll_calls += 1
        if (self.root / "down").exists():
            return {h: Observation(RunState.UNKNOWN) for h in handles}
        return {h: self._observe(h) for h in handles}

    def adopt(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        return self.poll(handles)

    def _observe(self, handle: Handle) -> Observation:
        run = self._dir(handle)
        if not run.exists():
            return Observation(RunState.UNLAUNCHED)
        ref = f"subprocess://{run.name}"
        done = run / "exit.json"
        if done.exists():
            e = json.loads(done.read_text())
            record = ExitRecord(
                e["code"], e["signal"], ExitReason(e["reason"]), e["start"], e["end"], ""
            )
            return Observation(RunState.EXITED, record, ref=ref)
        if (run / "job.pid").exists():
            return Observation(RunState.RUNNING, ref=ref)
        return Observation(RunState.QUEUED, ref=ref, detail="waiting for the gate file")

    def signal(self, handle: Handle, kind: StopKind) -> bool:
        run = self._dir(handle)
        if not run.exists() or (run / "exit.json").exists():
            return False
        (run / "cancel").write_text(kind.value)
        pid = run / "job.pid"
        if pid.exists():
            try:
                os.killpg(int(pid.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
        return True

    def set_time_limit(self, handle: Handle, seconds: float) -> bool:
        return False

    def send_signal(self, handle: Handle, signum: int) -> bool:
        return False

    def release(self, handle: Handle) -> bool:
        return True

    def settle_lost(self, handle: Handle, wait_s: float) -> Leftovers:
        return Leftovers(main_pid=None)

    def logs(
        self,
        handle: Handle,
        offset: int,
        limit: int,
        rank: int | None = None,
        stderr: bool = False,
    ) -> LogChunk:
        path = self._dir(handle) / "log"
        if not path.exists():
            return LogChunk(b"", offset, 0)
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read(limit)
            size = os.fstat(f.fileno()).st_size
        return LogChunk(data, offset + len(data), size)

    def log_location(self, job_id: int) -> str:
        return str(self.root / "runs")

    @property
    def data_dir(self) -> Path | None:
        return None

    def close(self) -> None:
        return None


def open_backend(name: str, settings: Mapping[str, object], context: BackendContext) -> Backend:
    from gpupool.core.backends import BackendConfigError

    unknown = sorted(set(settings))
    if unknown:
        raise BackendConfigError(unknown[0], "unknown setting (this backend takes none)")
    return SubprocessBackend(name, context)


def kill_runs(state_dir: Path) -> None:
    """Stop every runner and job process group this backend started (by recorded PID)."""
    for pid_file in list(state_dir.glob("runs/*/job.pid")) + list(
        state_dir.glob("runs/*/runner.pid")
    ):
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError, PermissionError):
            pass


def _run(run: Path) -> None:
    """The runner: QUEUED until the gate exists (or a cancel), then the command."""
    spec = json.loads((run / "request.json").read_text())
    gate = Path(spec["gate"])
    now = time.time()

    def record(code: int, sig: int | None, reason: ExitReason, start: float) -> None:
        e = {"code": code, "signal": sig, "reason": reason.value, "start": start}
        e["end"] = time.time()
        tmp = run / "exit.tmp"
        tmp.write_text(json.dumps(e))
        tmp.rename(run / "exit.json")

    while not gate.exists():
        if (run / "cancel").exists():
            record(143, 15, ExitReason.CANCELLED, now)
            return
        time.sleep(0.05)
    start = time.time()
    with (run / "log").open("ab") as log:
        proc = subprocess.Popen(
            spec["command"],
            env=spec["env"],
            cwd=spec["workdir"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        (run / "job.pid").write_text(str(proc.pid))
        code = proc.wait()
    sig = -code if code < 0 else None
    reason = ExitReason.CANCELLED if (run / "cancel").exists() else ExitReason.EXITED
    record(128 + sig if sig else code, sig, reason, start)


if __name__ == "__main__" and sys.argv[1:2] == ["run"]:
    _run(Path(sys.argv[2]))
