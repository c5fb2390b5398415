"""A real gpupool daemon in a subprocess, on a declared inventory, for integration tests.

Stops what it started by PID (never by name): the daemon, then every job supervisor and job
process group recorded in the state directory.

Waiting: every wait here is on a condition with a deadline (no fixed sleeps), and the
deadlines are generous, for a busy 2-core machine; a wait that cannot succeed any more (the
job ended in another state) fails at once, with the job's history.

Jobs are set up with `submit` (the client, in this process: a CLI process costs 0.1-1 s of
CPU); `cli_submit` and `cli` run the real CLI where the CLI is what a test is about. A job
that must keep running runs `FOREVER` (ended by cancel) or `until_file(path)` (ended by the
test creating `path`), never a duration.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpupool.client import Client, JobView
from gpupool.executor import job_cgroup
from gpupool.executor.cgroup_plan import forget_pool, pool_cgroups

# A job that runs until it is cancelled (or the test's cleanup kills it).
FOREVER = ("sleep", "infinity")
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT")


def until_file(path: Path | str) -> list[str]:
    """A job command that runs until `path` exists, then exits 0."""
    code = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)"
    return [sys.executable, "-c", code, str(path)]


class Pool:
    def __init__(
        self,
        root: Path,
        gpus: str | None = "4xA100-80GB",
        inventory: Path | None = None,
        listen: str | None = None,
        args: tuple[str, ...] = (),
        database_url: str | None = None,
    ) -> None:
        self.root = root
        self.args = args  # more `gpupool server` arguments, e.g. ("--lease-ttl", "2")
        # None: the state directory's SQLite file (tests/integration/backends.py makes others)
        self.database_url = database_url
        self.state_dir = root / "state"
        self.gpus = gpus
        self.inventory = inventory
        self.listen = listen
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.client = Client(self.state_dir)

    @property
    def port(self) -> int:
        """The TCP port of `listen` (a pool started with one)."""
        assert self.listen is not None, "this pool listens on its Unix socket only"
        return int(self.listen.rpartition(":")[2])

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["GPUPOOL_STATE_DIR"] = str(self.state_dir)
        env.pop("GPUPOOL_URL", None)
        return env

    def start(self, timeout: float = 60.0) -> Pool:
        cmd = [sys.executable, "-m", "gpupool", "server", "--poll-interval", "0.1"]
        if self.inventory:
            cmd += ["--inventory", str(self.inventory)]
        elif self.gpus:
            cmd += ["--gpus", self.gpus]
        if self.listen:
            cmd += ["--listen", self.listen]
        if self.database_url:
            cmd += ["--database-url", self.database_url]
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
        self.stop()  # not left running behind the error (it outlived test runs before)
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
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
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
        for cg in pool_cgroups(self.state_dir):  # what left its session, too
            job_cgroup.kill(cg, reap=False, wait_s=10)
            job_cgroup.remove(cg)
        forget_pool(self.state_dir)

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
        """Queue a job given as `gpupool submit` would take it, flags then a command
        (`--gpus 2 --time 1h -- CMD ARGS`, or `--gpus 2 CMD ARGS`), through the client: the
        spec is built as the CLI builds it (this pool's environment, `cwd` as the directory
        submitted from, the user's name, a fresh token). A spec file is the CLI's to read:
        use `cli_submit`. Raises ApiError when the daemon refuses the job."""
        wire = submit_spec(args, self.env, cwd or Path.cwd())
        return self.client.submit(wire, uuid.uuid4().hex).id

    def cli_submit(self, *args: str, cwd: Path | None = None) -> int:
        """Queue a job with the real `gpupool submit --parsable` (spec files and all)."""
        out = self.cli("submit", "--parsable", *args, check=True, cwd=cwd)
        return int(out.stdout.strip())

    def cancel(self, *job_ids: int) -> None:
        """Ask the daemon to cancel these jobs, as this process's user (the client)."""
        for job_id in job_ids:
            self.client.cancel(job_id)

    def token(self, user: str | None = None) -> str:
        """A new API token (for `user`, made by this process's user as pool admin), for
        talking to this pool over TCP."""
        return self.client.create_token(f"test-{uuid.uuid4().hex[:8]}", user).token

    def log(self, job_id: int) -> str:
        """The job's log so far (the client, not the CLI)."""
        return self.client.log(job_id).data.decode(errors="replace")

    def wait(self, job_id: int, timeout: float = 120) -> JobView:
        """The job once it has ended, whichever way."""
        return self._wait_job(job_id, lambda job: job.state in ENDED, "to end", timeout)

    def wait_state(self, job_id: int, state: str, timeout: float = 60) -> JobView:
        """The job once it is in `state`; fails at once if it ends in another state."""

        def there(job: JobView) -> bool:
            if job.state != state and job.state in ENDED:
                raise AssertionError(f"job {job_id} ended {job.state.value}, not {state}: {job}")
            return job.state == state

        return self._wait_job(job_id, there, f"to be {state}", timeout)

    def wait_reason(self, job_id: int, reason: str | None = None, timeout: float = 60) -> JobView:
        """The pending job once a scheduling pass has given it `reason` (any reason when
        None): the pass has seen it, so what it decided can be asserted."""

        def told(job: JobView) -> bool:
            if job.state != "PENDING":
                raise AssertionError(f"job {job_id} is {job.state.value}, not pending: {job}")
            return bool(job.reason) if reason is None else job.reason == reason

        what = f"a pass to give it reason {reason or '(any)'}"
        return self._wait_job(job_id, told, what, timeout)

    def _wait_job(
        self, job_id: int, done: Callable[[JobView], bool], what: str, timeout: float
    ) -> JobView:
        last: list[JobView] = []

        def probe() -> JobView | None:
            last[:] = [self.client.job(job_id)]
            return last[0] if done(last[0]) else None

        try:
            found: JobView = wait_for(probe, timeout, f"job {job_id} {what}")
        except WaitTimeout as exc:
            state = last[0].state.value if last else None
            raise WaitTimeout(f"{exc}; it is {state}: {last[0] if last else ''}") from None
        return found


def submit_spec(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> dict[str, Any]:
    """The wire spec that `gpupool submit ARGS`, run in `cwd` with `env`, would send (flags
    and a command; see Pool.submit)."""
    from gpupool.cli.submit import current_umask
    from gpupool.spec import SPEC_KEYS, build_spec, parse_env_assignments, spec_to_wire

    valued = {f"--{k.replace('_', '-')}": k for k in SPEC_KEYS if k not in SWITCHES}
    fields: dict[str, Any] = {}
    assignments: list[str] = []
    command: list[str] = []
    words = list(args)
    while words:
        word = words.pop(0)
        if word == "--":
            command = words
            break
        if word in ("--preemptible", "--no-preemptible"):
            fields["preemptible"] = word == "--preemptible"
        elif word == "--env":
            assignments.append(words.pop(0))
        elif word in valued:
            fields[valued[word]] = words.pop(0)
        elif word.startswith("-") or word.lower().endswith((".yaml", ".yml")):
            raise ValueError(f"Pool.submit takes spec flags and a command, not {word!r}: "
                             "use Pool.cli_submit for what only the CLI reads")  # fmt: skip
        else:
            command = [word, *words]
            break
    for numeric in ("gpus", "cpus"):
        if numeric in fields:
            fields[numeric] = _number(fields[numeric])
    if isinstance(fields.get("workdir"), str) and not fields["workdir"].startswith("~"):
        fields["workdir"] = os.path.abspath(cwd / fields["workdir"])
    if assignments:
        fields["env"] = parse_env_assignments(assignments)
    spec = build_spec(
        {**fields, "command": command},
        base_env=dict(env),
        default_workdir=str(cwd),
        umask=current_umask(),
    )
    wire = spec_to_wire(spec)
    if "project" not in fields:
        wire["project"] = None  # as the CLI: the daemon picks the user's default project
    return wire


SWITCHES = ("command", "env", "preemptible")  # spec keys that are not `--key VALUE` flags


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text  # the spec's check names the field


class WaitTimeout(AssertionError):
    """A condition a test waited for did not come within its deadline."""


def wait_for(pred: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """The first truthy value of ``pred()``, polled until ``timeout`` seconds have passed
    (then WaitTimeout). An exception from ``pred`` ends the wait at once."""
    end = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= end:
            raise WaitTimeout(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


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


def interruptible() -> None:
    """`preexec_fn` for a CLI process a test Ctrl-Cs: SIGINT back to its default, as at a
    terminal. A suite started in the background by a script (`cmd &`, nohup) inherits SIGINT
    ignored, and Python then installs no KeyboardInterrupt handler: the CLI would never see
    the Ctrl-C the test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
