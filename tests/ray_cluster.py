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

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

READY_DEADLINE_S = 480.0  # a head (or worker) on a slow, busy machine: minutes, a few tries
STOP_DEADLINE_S = 30.0

# Ray's settings for a slow, busy 2-core machine (issue 38). A Ray worker process (every job's
# supervisor actor, every gang driver and actor) must register with its raylet within
# `worker_register_timeout_seconds`, 60 by default, or the raylet kills it and starts
# another, with the same deadline, for ever: the job stays PENDING with Ray's "may be
# waiting for resources" and never starts. A worker's start is mostly `import ray` (3.5 s
# of CPU on the development machine, 2 s of it jsonschema building its IRI grammar); on a
# machine 2.6x slower, beside the suite's other workers and a CPU hog, it passed 60 s. So
# the deadline is 10 minutes (a worker that really hangs still fails the test's own wait),
# workers are not started ahead of need (Ray prestarts one per CPU when the first driver
# connects: 4-6 imports at once, for nothing), and at most 2 start at once (the cores).
# The dashboard, which `ray start` waits for, gets the same slack.
SLOW_MACHINE_SETTINGS = {
    "RAY_worker_register_timeout_seconds": "600",
    "RAY_prestart_worker_first_driver": "false",
    "RAY_enable_worker_prestart": "false",
    "RAY_worker_maximum_startup_concurrency": "2",
    "RAY_DASHBOARD_STARTUP_TIMEOUT_S": "300",
}


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


# `ray start`'s words when its node's raylet aborted during startup (start_head).
STARTUP_ABORTED = "The current node timed out during startup"
NODE_START_LOCK = Path(tempfile.gettempdir()) / "gpupool-tests-ray-node-start.lock"


@contextmanager
def one_node_starting() -> Iterator[None]:
    """Held while a Ray head starts: the test processes of this host (xdist's workers, two
    test runs) start their heads one at a time. Two at once on 2 cores doubled the time of
    every agent's imports, past the raylet's fixed wait for them (start_head)."""
    with NODE_START_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def agent_ports() -> list[str]:
    """A node's agents' ports, each given (free now), for two reasons. Ray's defaults are
    fixed (52365...), and two nodes on this host, or two test runs, would collide. And a
    raylet not told its agents' ports waits for each agent to write it to a file, 15 s at
    most, fixed in Ray 2.60, then aborts: on a slow, busy machine the dashboard agent's
    imports took longer and `ray start` failed ("the current node timed out during
    startup"). Given, the raylet reads no file for them, except the listen port's, which
    `ray start` does not pass on to it (NODE_NICENESS, LEAN_IMPORTS) (issue 38)."""
    return [
        f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}",
    ]


# First on the Ray nodes' PYTHONPATH: a package that makes `import rfc3987_syntax` fail, so
# that no Ray process builds its IRI grammar at import (its docstring). That import was 3.5
# of the 4.7 s the dashboard agent took to import beside the suite, which counts against
# the raylet's fixed 15 s (NODE_NICENESS), and is paid again by every Ray worker's start.
LEAN_IMPORTS = Path(__file__).resolve().parent / "ray_node_path"

# How much ahead of the suite's other processes a Ray node runs (`nice`, inherited by its
# raylet, agents and workers): on a slow, busy machine Ray 2.60's raylet aborts when its
# dashboard agent has not written its listen port within 15 s (fixed; that port is not
# passed to the raylet, so `agent_ports` cannot spare that wait). Measured in CI beside a
# CPU hog, the agent missed it in three tries in a row even with heads started one at a
# time; a Ray node on a machine of its own would not share its cores with a test suite.
NODE_NICENESS = -10


def ahead_of_the_suite() -> list[str]:
    """`nice -n NODE_NICENESS` where this process may raise priority (root), else nothing."""
    return ["nice", "-n", str(NODE_NICENESS)] if os.geteuid() == 0 else []


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
                [*ahead_of_the_suite(), *self.args],
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
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "disabled",
            "RAY_TMPDIR": str(self.tmp),
            "RAY_USAGE_STATS_ENABLED": "0",
            **SLOW_MACHINE_SETTINGS,
            # The job's `python3` must be this venv's (it imports ray).
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(
                [str(LEAN_IMPORTS), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
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
            *agent_ports(),
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
        """The job API answers and the head node is ALIVE at its GCS. The dashboard answers
        before the head's raylet has started (it waits for its agents, and may yet abort:
        start_head), so the answer alone is not enough; a live node has its agents up."""
        if self.head is None or not self.head.alive:
            raise RayUnavailable(f"the Ray head exited: see {self.head and self.head.log}")
        try:
            with urllib.request.urlopen(f"{self.address}/api/jobs/", timeout=2) as answer:
                if answer.status != 200:
                    return False
        except OSError:
            return False
        return self.alive_nodes() >= 1

    def start_head(self) -> RayCluster:
        """The head started and its job API up, within READY_DEADLINE_S. One node of this
        host's test processes starts at a time (`one_node_starting`), and a `ray start`
        whose raylet aborted at startup (STARTUP_ABORTED) is started again: Ray 2.60's raylet
        gives its dashboard agent 15 s, fixed, to write its listen port to a file, and on a
        slow, busy machine the agent's imports take longer. Any other exit is an error."""
        deadline = time.monotonic() + READY_DEADLINE_S
        log = self.root / "head.log"
        with one_node_starting():
            while True:
                said_before = log.stat().st_size if log.exists() else 0
                self.head = RayNode(self._head_args(), self.env, log)
                self.head.start()
                left = max(deadline - time.monotonic(), 1.0)
                wait_for("the Ray head's job API", self._up_or_exited, left)
                if self.head.alive:
                    return self
                with log.open("rb") as out:
                    out.seek(said_before)
                    said = out.read().decode(errors="replace")
                if STARTUP_ABORTED not in said or time.monotonic() > deadline:
                    raise RayUnavailable(f"the Ray head exited: see {log}")
                self.head.stop()  # its processes that outlived `ray start`, then again

    def _up_or_exited(self) -> bool:
        if self.head is None or not self.head.alive:
            return True
        return self._jobs_api_ready()

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
            *agent_ports(),
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


def head_and_worker(
    root: Path, head_gpus: int, worker_gpus: int, head_cpus: int = 4, worker_cpus: int = 2
) -> Iterator[RayCluster]:
    """The body of a module fixture: a head and one worker node, stopped after; the test is
    skipped when Ray cannot start here (GPUPOOL_REQUIRE_ALL=1 makes that a failure)."""
    import pytest

    try:
        started = start_cluster(root, gpus=head_gpus, cpus=head_cpus)
    except RayUnavailable as exc:
        pytest.skip(f"a local Ray head cannot start here: {exc}")
    try:
        started.add_worker(gpus=worker_gpus, cpus=worker_cpus)
        yield started
    finally:
        started.stop()
