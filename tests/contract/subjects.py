"""The implementations of the executor contract, each set up behind one interface (`Subject`)
for the contract suite (test_executor_contract.py): the local executor on a fresh state
directory, the Slurm backend on a real Slurm, the Ray backend on a real Ray head, and the
Kubernetes backend on the recorded API server playing a cluster (kubernetes_play.py).

Every run is the same small program (RUN: `DIR MODE CODE`): it notes its start in
DIR/starts, prints `hello from NAME` (NAME: DIR's name, `JOB-ATTEMPT`), then
- `exit`: exits CODE;
- `wait`: notes DIR/ready and waits until DIR/go exists, then exits CODE;
- `stubborn`: ignores SIGTERM (noting when the first came in DIR/term), notes DIR/ready and
  writes the time into DIR/alive every 0.1 s until it is killed.
DIR is under the test's directory, which every engine here sees (they all run on this
machine). The recorded Kubernetes server runs nothing (`runs_commands` False): it plays each
run's life from these same words.

A Subject owns one test's executor: `reopen` is what a restarted daemon makes (a new object
over the same state), `calls` counts the requests it made to its engine, `runs_of` counts
the runs the engine holds for a handle (a second sbatch, a second Ray job, a second Job
would show), and `close` ends whatever is still running.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from kubernetes_api import write_kubeconfig
from slurm_cluster import SlurmCluster

from contract.kubernetes_play import PlayedCluster
from gpupool.backends.kubernetes import open_backend as open_kubernetes
from gpupool.backends.ray import open_backend as open_ray
from gpupool.backends.ray.backend import RayBackend
from gpupool.backends.slurm import open_backend as open_slurm
from gpupool.backends.slurm.backend import SlurmBackend
from gpupool.core.backends import Backend, BackendContext, EngineNodeState, run_name
from gpupool.core.execution import (
    Allocation,
    BackendRequest,
    Capabilities,
    ContainerLaunch,
    Executor,
    Handle,
    LaunchRequest,
    Observation,
    RunState,
    StopKind,
)
from gpupool.executor import LocalExecutor
from integration import pool_harness

PY = sys.executable
DEADLINE_S = 300.0  # a run on a slow, busy 2-core machine: seconds, minutes at worst (Ray)
LIVE = (RunState.QUEUED, RunState.RUNNING)

RUN = r"""
import os, pathlib, signal, sys, time
d, mode, code = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
d.mkdir(parents=True, exist_ok=True)
def note(name, text):
    tmp = d / (name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, d / name)
with open(d / "starts", "a") as f:
    f.write(f"{os.getpid()}\n")
print(f"hello from {d.name}", flush=True)
if mode == "exit":
    sys.exit(code)
def first_term(*_):
    if not (d / "term").exists():
        note("term", repr(time.time()))
if mode == "stubborn":
    signal.signal(signal.SIGTERM, first_term)
note("ready", str(os.getpid()))
while mode == "stubborn" or not (d / "go").exists():
    if mode == "stubborn":
        note("alive", repr(time.time()))
    time.sleep(0.1)
sys.exit(code)
"""


def admitted_to(backend: Backend) -> tuple[str, ...]:
    """The node every run of a subject is pinned to, as the pool admits runs (admission
    "pool", docs/backends.md): the last node its engine reports up (a worker, where a
    cluster has one)."""
    capacity = backend.capacity()
    assert capacity.known, capacity.problem
    up = [n for n in capacity.nodes if n.state is EngineNodeState.UP]
    assert up, capacity
    return (up[-1].pin or up[-1].name,)


def wait_for(what: str, check: Callable[[], Any], deadline_s: float = DEADLINE_S) -> Any:
    """`check()`'s first true value, polled until the deadline (the harness's wait)."""
    return pool_harness.wait_for(check, timeout=deadline_s, what=what)


def wait_obs(
    executor: Executor, handle: Handle, done: Callable[[Observation], bool]
) -> Observation:
    """The run's first Observation that is `done`, polling as the engine does."""
    seen: list[Observation] = []

    def reached() -> bool:
        seen.append(executor.poll([handle])[handle])
        return done(seen[-1])

    wait_for(f"run {handle} (last seen: {seen[-1:]})", reached)
    return seen[-1]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


class Subject:
    """One implementation of the executor contract, set up for one test (module docstring).

    `declared`: the capabilities its documentation says it declares (docs/backends.md, the
    executor's docstring), pinned by the suite.
    """

    name = ""
    runs_commands = True
    declared = Capabilities()

    def __init__(self, root: Path) -> None:
        self.root = root
        self._jobs = 0
        self.handles: list[Handle] = []  # every handle given out, to be stopped at the end

    # -- what every subject answers -------------------------------------------------------
    @property
    def executor(self) -> Executor:
        raise NotImplementedError

    @property
    def backend(self) -> Backend | None:
        """The executor as a Backend (core/backends.py); None for the local executor."""
        return None

    def new_handle(self, attempt: int = 0) -> Handle:
        self._jobs += 1
        return self.handle(self._jobs, attempt)

    def handle(self, job_id: int, attempt: int) -> Handle:
        made = Handle(job_id, attempt)
        self.handles.append(made)
        return made

    def run_dir(self, handle: Handle) -> Path:
        return self.root / "runs" / f"{handle.job_id}-{handle.attempt}"

    def command(self, handle: Handle, mode: str, code: int) -> tuple[str, ...]:
        return (PY, "-c", RUN, str(self.run_dir(handle)), mode, str(code))

    def output(self, handle: Handle) -> bytes:
        """What the run prints first: its log holds it."""
        return f"hello from {self.run_dir(handle).name}\n".encode()

    def request(
        self, handle: Handle, mode: str, code: int = 0, grace_s: float = 2.0, image: str = ""
    ) -> LaunchRequest:
        raise NotImplementedError

    def reopen(self) -> Executor:
        """A new executor object over the same state, as a restarted daemon makes; the old
        one is let go first (its runs keep running)."""
        raise NotImplementedError

    def runs_of(self, handle: Handle) -> int:
        raise NotImplementedError

    def calls(self) -> int:
        """Requests made to the engine so far (squeue, HTTP calls); 0 for the local executor,
        which reads files."""
        return 0

    # -- what the runs did (runs_commands) ----------------------------------------------
    def starts(self, handle: Handle) -> int:
        path = self.run_dir(handle) / "starts"
        return len(path.read_text().split()) if path.exists() else 0

    def wait_ready(self, handle: Handle) -> None:
        """Until the command has set itself up (a stubborn one: its SIGTERM handler)."""
        if self.runs_commands:
            wait_for(f"run {handle} ready", (self.run_dir(handle) / "ready").exists)

    def finish(self, handle: Handle) -> None:
        """A `wait` run ends with its code (kubernetes_play reads the same file)."""
        where = self.run_dir(handle)
        where.mkdir(parents=True, exist_ok=True)
        (where / "go").touch()

    def times_in_grace(self, handle: Handle) -> tuple[float, float]:
        """A stubborn run's first SIGTERM and its last sign of life, wall-clock."""
        where = self.run_dir(handle)
        return float((where / "term").read_text()), float((where / "alive").read_text())

    def gone(self, handle: Handle) -> bool:
        """No process of the run's command is left."""
        return not _alive(int((self.run_dir(handle) / "ready").read_text()))

    def grace_declared(self, handle: Handle) -> float | None:
        """The grace the engine was told, where the engine keeps it (Kubernetes)."""
        return None

    # -- the end ------------------------------------------------------------------------
    def close(self) -> None:
        """Every run given out ends: `wait` runs are let go, the rest stopped."""
        for handle in self.handles:
            self.finish(handle)
        executor = self.executor
        for handle in self.handles:
            executor.signal(handle, StopKind.CANCEL)
        with suppress(AssertionError):
            wait_for(
                "every run over",
                lambda: all(o.state not in LIVE for o in executor.poll(self.handles).values()),
                60.0,
            )
        executor.close()


class LocalSubject(Subject):
    name = "local"
    declared = Capabilities(preemption_signal=True, adopts_after_restart=True, containers=True)

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.state = root / "state"
        self._executor = LocalExecutor(self.state)

    @property
    def executor(self) -> Executor:
        return self._executor

    def request(
        self, handle: Handle, mode: str, code: int = 0, grace_s: float = 2.0, image: str = ""
    ) -> LaunchRequest:
        return LaunchRequest(
            handle=handle,
            command=self.command(handle, mode, code),
            env={"PATH": os.environ.get("PATH", os.defpath)},
            workdir=str(self.root),
            time_limit_s=None,
            grace_s=grace_s,
            allocation=Allocation("local", ()),
            container=ContainerLaunch(image, None, {}) if image else None,
        )

    def reopen(self) -> Executor:
        self._executor.close()
        self._executor = LocalExecutor(self.state)
        return self._executor

    def runs_of(self, handle: Handle) -> int:
        return self.starts(handle)  # no engine of its own: the command's starts


class SlurmSubject(Subject):
    name = "slurm"
    declared = Capabilities(multi_node=True, preemption_signal=True, adopts_after_restart=True)

    def __init__(self, root: Path, cluster: SlurmCluster, pool_id: str) -> None:
        super().__init__(root)
        self.cluster = cluster
        self.context = BackendContext(pool_id, root / "state")
        self._calls = 0
        self._backend = self._open()
        self.pinned = admitted_to(self._backend)
        self._calls = 0

    def _open(self) -> SlurmBackend:
        table: dict[str, object] = {
            "kind": "slurm",
            "slurm_conf": str(self.cluster.conf),
            "output_dir": str(self.root / "out"),
            "launcher_python": PY,
            "command_timeout_s": 10,
        }
        backend = open_slurm("hpc", table, self.context)
        assert isinstance(backend, SlurmBackend)
        run = backend.runner.run

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._calls += 1
            return run(*args, **kwargs)

        setattr(backend.runner, "run", counted)  # noqa: B010 (a method of this instance)
        return backend

    @property
    def executor(self) -> Executor:
        return self._backend

    @property
    def backend(self) -> Backend | None:
        return self._backend

    def request(
        self, handle: Handle, mode: str, code: int = 0, grace_s: float = 2.0, image: str = ""
    ) -> LaunchRequest:
        return LaunchRequest(
            handle=handle,
            command=self.command(handle, mode, code),
            env=dict(self.cluster.env),  # carries the cluster's token: teardown finds every job
            workdir=str(self.root),
            time_limit_s=None,
            grace_s=grace_s,
            allocation=Allocation("hpc", ()),
            container=ContainerLaunch(image, None, {}) if image else None,
            backend=BackendRequest(name="", project="default", gpus_per_node=0, pinned=self.pinned),
        )

    def reopen(self) -> Executor:
        self._backend.close()
        self._backend = self._open()
        return self._backend

    def runs_of(self, handle: Handle) -> int:
        name = run_name(self.context.pool_id, handle)
        out = self.cluster.run(["squeue", "-h", "-t", "all", f"--name={name}", "-o", "%i"])
        assert out.returncode == 0, out.stderr
        return len(out.stdout.split())

    def calls(self) -> int:
        return self._calls


class RaySubject(Subject):
    name = "ray"
    declared = Capabilities(multi_node=True, adopts_after_restart=True, fractional_gpus=True)

    def __init__(self, root: Path, address: str, pool_id: str) -> None:
        super().__init__(root)
        self.address = address
        self.context = BackendContext(pool_id, root / "state")
        self._calls = 0
        self._backend = self._open()
        self.pinned = admitted_to(self._backend)
        self._calls = 0

    def _open(self) -> RayBackend:
        table = {"kind": "ray", "address": self.address, "request_timeout_s": 10.0}
        backend = open_ray("ray", table, self.context)
        assert isinstance(backend, RayBackend)
        client = backend._connect()
        request = client._do_request

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._calls += 1
            return request(*args, **kwargs)

        setattr(client, "_do_request", counted)  # noqa: B010 (a method of this instance)
        return backend

    @property
    def executor(self) -> Executor:
        return self._backend

    @property
    def backend(self) -> Backend | None:
        return self._backend

    def request(
        self, handle: Handle, mode: str, code: int = 0, grace_s: float = 2.0, image: str = ""
    ) -> LaunchRequest:
        job = str(handle.job_id)
        return LaunchRequest(
            handle=handle,
            command=self.command(handle, mode, code),
            env={},
            workdir=str(self.root),
            time_limit_s=None,
            grace_s=grace_s,
            allocation=Allocation("ray", ()),
            container=ContainerLaunch(image, None, {}) if image else None,
            backend=BackendRequest(
                name=f"job{job}",
                project="vision",
                gpus_per_node=0,
                job_env={"GPUPOOL_JOB_ID": job},
                pinned=self.pinned,
            ),
        )

    def reopen(self) -> Executor:
        self._backend.close()
        self._backend = self._open()
        return self._backend

    def runs_of(self, handle: Handle) -> int:
        name = run_name(self.context.pool_id, handle)
        jobs = self._backend._connect().list_jobs()
        return sum(1 for job in jobs if job.submission_id == name)

    def calls(self) -> int:
        return self._calls


class KubernetesSubject(Subject):
    name = "kubernetes"
    runs_commands = False  # the recorded server plays a cluster: nothing runs
    declared = Capabilities(multi_node=True, containers=True, adopts_after_restart=True)

    def __init__(self, root: Path, api: PlayedCluster) -> None:
        super().__init__(root)
        self.api = api
        self.context = BackendContext("p1", root / "state")
        self.kubeconfig = write_kubeconfig(root / "kubeconfig", api.url)
        self._backend = self._open()
        self.pinned = admitted_to(self._backend)  # the played cluster's node list

    def _open(self) -> Backend:
        table = {
            "kubeconfig": str(self.kubeconfig),
            "namespace": "ml",
            "default_image": "python:3.12-slim",
            "request_timeout_s": 5,
        }
        return open_kubernetes("k8s", table, self.context)

    @property
    def executor(self) -> Executor:
        return self._backend

    @property
    def backend(self) -> Backend | None:
        return self._backend

    def request(
        self, handle: Handle, mode: str, code: int = 0, grace_s: float = 2.0, image: str = ""
    ) -> LaunchRequest:
        return LaunchRequest(
            handle=handle,
            command=self.command(handle, mode, code),
            env={"PATH": "/usr/bin"},
            workdir=str(self.root),
            time_limit_s=None,
            grace_s=grace_s,
            allocation=Allocation("k8s", ()),
            container=ContainerLaunch(image, None, {}) if image else None,
            backend=BackendRequest(name="", project="vision", gpus_per_node=0, pinned=self.pinned),
        )

    def reopen(self) -> Executor:
        self._backend.close()
        self._backend = self._open()
        return self._backend

    def runs_of(self, handle: Handle) -> int:
        return len(self.api.created(handle.job_id, handle.attempt))

    def calls(self) -> int:
        return len(self.api.requests())

    def grace_declared(self, handle: Handle) -> float | None:
        """The Job's terminationGracePeriodSeconds: the kubelet's SIGTERM, grace, SIGKILL."""
        job = self.api.job_sent(run_name(self.context.pool_id, handle))
        spec = job["spec"]
        assert isinstance(spec, dict) and isinstance(spec["template"], dict)
        pod = spec["template"]["spec"]
        assert isinstance(pod, dict)
        grace = pod["terminationGracePeriodSeconds"]
        assert isinstance(grace, int | float)
        return float(grace)

    def deletes(self, handle: Handle) -> list[dict[str, list[str]]]:
        """The query of each DELETE of the run's Job (its propagation policy)."""
        path = f"/apis/batch/v1/namespaces/ml/jobs/{run_name(self.context.pool_id, handle)}"
        return [s.query for s in self.api.requests() if (s.method, s.path) == ("DELETE", path)]
