"""A real local Ray cluster for the Ray backend's tests: a head (and workers) started as
`ray start --block` processes, each in its own session, stopped by PID.

ENGINES.md has what was seen working here: RAY_AUTH_MODE=disabled (token auth writes to
~/.ray), RAY_TMPDIR in the test's directory, 127.0.0.1 given explicitly, fake GPUs as
`--num-gpus` (Ray sets CUDA_VISIBLE_DEVICES from them). The dashboard (the job submission
API) needs ray[default]; its ports and the head's other fixed ports (client server,
dashboard agent) are chosen free so that two test runs never collide. Readiness is polled
with a deadline; the machine has 2 cores, so deadlines are generous.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

READY_DEADLINE_S = 120.0
STOP_DEADLINE_S = 30.0


class RayUnavailable(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ray_command() -> str:
    """The `ray` of the interpreter running the tests (its venv's bin)."""
    found = Path(sys.executable).with_name("ray")
    if not found.exists():
        raise RayUnavailable(f"no `ray` next to {sys.executable}: install gpupool[backends]")
    return str(found)


def wait_for(what: str, check: Callable[[], bool], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {deadline_s:g} s")
        time.sleep(0.2)


class RayNode:
    """One `ray start --block` process (head or worker), in a session of its own."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.args, self.env, self.log = args, env, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.args,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # setsid: its raylet, GCS and workers in its group
            )

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to the node's whole process group (its session): a crash, not a stop."""
        self._signal_group(signal.SIGKILL)
        self._reap()

    def stop(self) -> None:
        """SIGTERM to the `ray start --block` process (it stops its node's processes), then
        SIGKILL to its session after a deadline."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                pass
        self._signal_group(signal.SIGKILL)
        self._reap()

    def _signal_group(self, sig: int) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, sig)  # the session's group: pgid == its leader's pid
            except ProcessLookupError:
                pass

    def _reap(self) -> None:
        if self.proc is not None:
            try:
                self.proc.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                pass


class RayCluster:
    """A head with `gpus` fake GPUs and `cpus` CPUs; workers added with `add_worker`."""

    def __init__(self, root: Path, gpus: int = 4, cpus: int = 4) -> None:
        self.root = root
        # RAY_TMPDIR: short, Ray's socket paths (107 bytes at most) must fit below it, which
        # pytest's own tmp_path (deeper under xdist's popen-gwN) does not promise.
        self.tmp = Path(tempfile.mkdtemp(prefix="gpray-", dir="/tmp"))
        self.gpus, self.cpus = gpus, cpus
        self.port = free_port()
        self.dashboard_port = free_port()
        self.client_port = free_port()
        self.agent_port = free_port()
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "disabled",
            "RAY_TMPDIR": str(self.tmp),
            "RAY_USAGE_STATS_ENABLED": "0",
            # The job's `python3` must be this venv's (it imports ray).
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        }
        self.head: RayNode | None = None
        self.workers: list[RayNode] = []

    @property
    def address(self) -> str:
        """The job submission API (the dashboard)."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    def _head_args(self) -> list[str]:
        return [
            ray_command(), "start", "--head", "--block",
            f"--port={self.port}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={self.dashboard_port}",
            f"--ray-client-server-port={self.client_port}",
            f"--dashboard-agent-listen-port={self.agent_port}",
            "--node-ip-address=127.0.0.1",
            f"--num-gpus={self.gpus}",
            f"--num-cpus={self.cpus}",
            "--object-store-memory=100000000",
            "--disable-usage-stats",
        ]  # fmt: skip

    def version(self) -> dict[str, object] | None:
        """The head's /api/version answer, or None while it does not answer."""
        import json

        try:
            with urllib.request.urlopen(f"{self.address}/api/version", timeout=2) as answer:
                found = json.loads(answer.read())
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def _jobs_api_ready(self) -> bool:
        """The job API answers and the head node's agent is up (a submit needs it)."""
        if self.head is None or not self.head.alive:
            raise RayUnavailable(f"the Ray head exited: see {self.head and self.head.log}")
        try:
            with urllib.request.urlopen(f"{self.address}/api/jobs/", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    def start_head(self) -> RayCluster:
        self.head = RayNode(self._head_args(), self.env, self.root / "head.log")
        self.head.start()
        wait_for("the Ray head's job API", self._jobs_api_ready, READY_DEADLINE_S)
        return self

    def kill_head(self) -> None:
        """The head killed (SIGKILL to its session), as a crashed head machine. The worker
        nodes go with it: on this one host, a worker's processes name the head's address,
        which `ray start --head` takes for a head still running and refuses to start."""
        assert self.head is not None
        self.head.kill()
        for worker in self.workers:
            worker.kill()
        self.workers.clear()

    def add_worker(self, gpus: int, cpus: int) -> None:
        args = [
            ray_command(), "start", "--block",
            f"--address=127.0.0.1:{self.port}",
            "--node-ip-address=127.0.0.1",
            f"--num-gpus={gpus}",
            f"--num-cpus={cpus}",
            "--object-store-memory=100000000",
            "--disable-usage-stats",
        ]  # fmt: skip
        n = len(self.workers)
        worker = RayNode(args, self.env, self.root / f"worker{n}.log")
        worker.start()
        self.workers.append(worker)

    def alive_nodes(self) -> int:
        """How many nodes the head's state API lists as ALIVE (0 while it does not answer)."""
        import json

        try:
            with urllib.request.urlopen(f"{self.address}/api/v0/nodes?limit=100", timeout=5) as a:
                nodes = json.loads(a.read())["data"]["result"]["result"]
        except (OSError, ValueError, KeyError, TypeError):
            return 0
        return sum(1 for node in nodes if node.get("state") == "ALIVE")

    def wait_workers_joined(self, deadline_s: float = READY_DEADLINE_S) -> None:
        """Until every worker node is ALIVE at the head, starting again a worker whose `ray
        start` has exited: Ray gives a new node 30 s to register, fixed, and on a busy
        2-core machine (the suite runs in parallel) a worker can miss that and exit; a gang
        waiting for its node would then wait for ever."""

        def joined() -> bool:
            for worker in self.workers:
                if not worker.alive:
                    worker.start()
            return self.alive_nodes() >= 1 + len(self.workers)

        wait_for("every Ray worker node joined", joined, deadline_s)

    def stop(self) -> None:
        for node in [*self.workers, *([self.head] if self.head else [])]:
            node.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def start_cluster(root: Path, gpus: int = 4, cpus: int = 4) -> RayCluster:
    """A started head, or RayUnavailable saying why (its log's tail)."""
    cluster = RayCluster(root, gpus, cpus)
    try:
        return cluster.start_head()
    except (RayUnavailable, TimeoutError, OSError) as exc:
        cluster.stop()
        log = root / "head.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RayUnavailable(f"{exc}\n{tail}") from None
