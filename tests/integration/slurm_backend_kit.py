"""The Slurm backend driven directly, as the tests of test_slurm_backend.py and
test_slurm_checkpoint.py drive it: a backend on a test cluster, a LaunchRequest, waiting on
an Observation, and a command that catches a signal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from slurm_cluster import SlurmCluster

from gpupool.backends.slurm import open_backend
from gpupool.backends.slurm.backend import SlurmBackend
from gpupool.core.backends import BackendContext
from gpupool.core.execution import (
    Allocation,
    BackendRequest,
    Handle,
    LaunchRequest,
    Observation,
    RankLayout,
    RunState,
)

PY = sys.executable
DEADLINE_S = 120.0


def make_backend(
    cluster: SlurmCluster, root: Path, name: str = "hpc", **settings: object
) -> SlurmBackend:
    table: dict[str, object] = {
        "kind": "slurm",
        "slurm_conf": str(cluster.conf),
        "output_dir": str(root / "out"),
        "launcher_python": PY,
        "command_timeout_s": 10,
        **settings,
    }
    backend = open_backend(name, table, BackendContext("t1", root / "state"))
    assert isinstance(backend, SlurmBackend)
    return backend


def request(
    cluster: SlurmCluster,
    handle: Handle,
    command: list[str],
    *,
    nodes: int = 1,
    gpus: int = 0,
    time_limit_s: float | None = None,
    distributed: bool = False,
    separate_stderr: bool = False,
    grace_s: float = 2.0,
) -> LaunchRequest:
    return LaunchRequest(
        handle=handle,
        command=tuple(command),
        env=dict(cluster.env),  # carries the cluster's token: teardown finds every job
        workdir=str(cluster.workdir),
        time_limit_s=time_limit_s,
        grace_s=grace_s,
        allocation=Allocation("hpc", ()),
        ranks=RankLayout(nproc_per_node=gpus, nnodes=nodes) if distributed else None,
        separate_stderr=separate_stderr,
        backend=BackendRequest(name="", project="default", gpus_per_node=gpus, nodes=nodes),
    )


def wait_obs(
    backend: SlurmBackend,
    handle: Handle,
    done: Callable[[Observation], bool],
    timeout: float = DEADLINE_S,
) -> Observation:
    deadline = time.monotonic() + timeout
    obs = backend.poll([handle])[handle]
    while not done(obs):
        assert time.monotonic() < deadline, f"run {handle} still {obs} after {timeout}s"
        time.sleep(0.3)
        obs = backend.poll([handle])[handle]
    return obs


def exited(obs: Observation) -> bool:
    return obs.state is RunState.EXITED


def running(obs: Observation) -> bool:
    return obs.state is RunState.RUNNING


# A python command that marks itself ready (DIR/ready) and catches SIGNAL: its handler
# writes DIR/got-SIGNAL, then exits 0 when END is "end", or lets the command run on.
CATCHER = """
import pathlib, signal, sys, time
d, sig, end = pathlib.Path(sys.argv[1]), signal.Signals[sys.argv[2]], sys.argv[3] == "end"
def got(signum, frame):
    (d / ("got-" + sig.name)).touch()
    if end:
        sys.exit(0)
signal.signal(sig, got)
(d / "ready").touch()
time.sleep(600)
"""


def catcher(where: Path, sig: str, end: bool) -> list[str]:
    return [PY, "-c", CATCHER, str(where), sig, "end" if end else "on"]


# A python command that marks itself ready (DIR/ready), notes when the first SIGTERM came
# (DIR/term; a later one, e.g. the final scancel's, changes nothing) and goes on, writing
# the time into DIR/alive every 0.1 s until it is killed.
STUBBORN = """
import os, pathlib, signal, sys, time
d = pathlib.Path(sys.argv[1])
def note(path, text):
    tmp = d / (path + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, d / path)
def first_term(*_):
    try:
        fd = os.open(d / "term", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return
    os.write(fd, repr(time.time()).encode())
    os.close(fd)
signal.signal(signal.SIGTERM, first_term)
note("ready", "")
while True:
    note("alive", repr(time.time()))
    time.sleep(0.1)
"""


def stubborn(where: Path) -> list[str]:
    return [PY, "-c", STUBBORN, str(where)]
