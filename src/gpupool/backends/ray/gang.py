"""A gang's driver on the Ray cluster: the entrypoint of a multi-node or distributed run.

render.py ships this file's source as the Ray job's entrypoint (`PYTHON -c SOURCE`), with
the gang in the job's environment (`GPUPOOL_RAY_GANG`, JSON: `GangSpec`), so nothing of
gpupool needs to be installed on the cluster: only Ray, which the driver imports.

What it does (docs/backends.md, "Ray", "Gangs"):
- reserves the whole gang at once: a placement group of one bundle per node
  (`{"GPU": gpus_per_node, "CPU": cpus_per_node}`), STRICT_SPREAD over `nodes` nodes, or
  STRICT_PACK for one; it waits while the cluster has no room, all or nothing;
- starts one `NodeRunner` actor in each bundle, with the bundle's GPUs (Ray sets each
  actor's CUDA_VISIBLE_DEVICES); MASTER_ADDR is the first bundle's node IP and MASTER_PORT
  a port free there;
- each actor starts the command `nproc_per_node` times (torchrun's environment per rank:
  RANK, LOCAL_RANK, WORLD_SIZE, NODE_RANK, ...; one per node when not distributed), copies
  each rank's output with a `[rank K] ` prefix, and answers the first failed rank's code;
- the gang ends as a whole: a failed node, a SIGTERM (Ray's `stop_job`) or the time limit
  stops every rank (SIGTERM, the grace, SIGKILL). The driver exits with the first failure's
  code, 124 at the time limit (as coreutils' `timeout`), 143 when stopped.

Rank processes stay in their actor's process group, so Ray's clean-up of a dead worker
(killpg) also ends whatever they started.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from ray import ObjectRef


GANG_ENV = "GPUPOOL_RAY_GANG"
TIMEOUT_EXIT = 124  # as coreutils' timeout: the time limit stopped the run
STOPPED_EXIT = 128 + signal.SIGTERM
POLL_S = 0.5
PIN_AMOUNT = 0.001  # of a node's `node:IP` resource, to pin a bundle there (capacity.py)
NODE_ID_RE = re.compile(r"[0-9a-f]{56}")  # a pin by node id, not IP (capacity.py)


class GangSpec(TypedDict):
    command: list[str]
    workdir: str | None  # None: where Ray starts the entrypoint
    nodes: int
    gpus_per_node: int
    cpus_per_node: float
    mem_bytes_per_node: int | None
    nproc_per_node: int  # ranks per node (1 when not distributed)
    strategy: str  # STRICT_SPREAD (several nodes) or STRICT_PACK (one)
    time_limit_s: float | None
    grace_s: float
    # The nodes the pool admitted the gang to, one per node ([] for none): bundle i asks
    # PIN_AMOUNT of Ray's built-in resource `node:IP` of the i-th, or, for a pin that is a
    # node id (several nodes on one IP), selects that node's `ray.io/node-id` label; the
    # placement group can then only form on those nodes.
    pins: list[str]


def rank_env(
    base: dict[str, str],
    nproc: int,
    nnodes: int,
    node_rank: int,
    local: int,
    master: str,
    port: int,
) -> dict[str, str]:
    """torchrun's environment for local rank `local` (as executor/rank_launcher.py)."""
    env = dict(base)
    env.update(
        {
            "MASTER_ADDR": master,
            "MASTER_PORT": str(port),
            "WORLD_SIZE": str(nproc * nnodes),
            "RANK": str(node_rank * nproc + local),
            "LOCAL_RANK": str(local),
            "LOCAL_WORLD_SIZE": str(nproc),
            "NODE_RANK": str(node_rank),
            "GROUP_RANK": str(node_rank),
        }
    )
    if nproc > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _copy_lines(stream: IO[bytes], rank: int) -> None:
    prefix = f"[rank {rank}] ".encode()
    for line in iter(stream.readline, b""):
        sys.stdout.buffer.write(prefix + line if line.endswith(b"\n") else prefix + line + b"\n")
        sys.stdout.flush()


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode  # a signal as shells show it


class NodeRunner:
    """One node of the gang (an actor holding its bundle's GPUs and CPUs)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.lock = threading.Lock()
        self.stopping = False

    def ip(self) -> str:
        import ray.util

        node_ip: Callable[[], str] = ray.util.get_node_ip_address
        return node_ip()

    def free_port(self) -> int:
        with socket.socket() as s:
            s.bind(("", 0))
            return int(s.getsockname()[1])

    def run(self, spec: GangSpec, node_rank: int, master: str, port: int) -> int:
        """Start this node's ranks, wait for them all; the first failure's code, else 0."""
        nproc = spec["nproc_per_node"]
        first = node_rank * nproc
        copiers = []
        with self.lock:
            if self.stopping:
                return STOPPED_EXIT
            for local in range(nproc):
                env = rank_env(
                    dict(os.environ), nproc, spec["nodes"], node_rank, local, master, port
                )
                try:
                    proc = subprocess.Popen(
                        spec["command"],
                        cwd=spec["workdir"],
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                    )
                except OSError as exc:
                    print(f"gpupool: rank {first + local} not started: {exc}", flush=True)
                    self._signal_all(signal.SIGKILL)
                    return 127 if isinstance(exc, FileNotFoundError) else 126
                self.procs.append(proc)
                assert proc.stdout is not None
                copier = threading.Thread(target=_copy_lines, args=(proc.stdout, first + local))
                copier.start()
                copiers.append(copier)
        failed: int | None = None
        pending = list(self.procs)
        while pending:
            for proc in list(pending):
                code = proc.poll()
                if code is None:
                    continue
                pending.remove(proc)
                if code != 0 and failed is None:
                    failed = _exit_code(code)
                    self.stop(spec["grace_s"])
            if pending:
                time.sleep(0.1)
        for copier in copiers:
            copier.join(timeout=5)
        return failed or 0

    def _signal_all(self, sig: int) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    pass

    def stop(self, grace_s: float) -> None:
        """SIGTERM to every rank, `grace_s`, SIGKILL to those left (in a thread: returns)."""
        with self.lock:
            self.stopping = True
            self._signal_all(signal.SIGTERM)

        def finish() -> None:
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and any(p.poll() is None for p in self.procs):
                time.sleep(0.1)
            self._signal_all(signal.SIGKILL)

        threading.Thread(target=finish, daemon=True).start()


def _call(actor: object, method: str, *args: object) -> ObjectRef[object]:
    """`actor.method.remote(*args)`: Ray's actor handles are not typed method by method."""
    ref: ObjectRef[object] = getattr(actor, method).remote(*args)
    return ref


def main() -> int:
    # Imported here: render.py imports this module (for GangSpec) without Ray.
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    spec: GangSpec = json.loads(os.environ[GANG_ENV])
    stop_asked = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop_asked.set())
    signal.signal(signal.SIGINT, lambda *_: stop_asked.set())
    deadline = None if spec["time_limit_s"] is None else time.monotonic() + spec["time_limit_s"]
    ray.init(log_to_driver=True)
    bundle: dict[str, float] = {"CPU": spec["cpus_per_node"]}
    if spec["gpus_per_node"]:
        bundle["GPU"] = spec["gpus_per_node"]
    if spec["mem_bytes_per_node"]:
        bundle["memory"] = spec["mem_bytes_per_node"]
    print(f"gpupool: reserving {spec['nodes']} x {bundle} ({spec['strategy']})", flush=True)
    pins = spec.get("pins") or []
    bundles = [dict(bundle) for _ in range(spec["nodes"])]
    by_id = [NODE_ID_RE.fullmatch(pin) is not None for pin in pins]
    for pinned, pin, is_id in zip(bundles, pins, by_id, strict=False):
        if not is_id:
            pinned[f"node:{pin}"] = PIN_AMOUNT
    if any(by_id):
        selectors = [{"ray.io/node-id": p} if i else {} for p, i in zip(pins, by_id, strict=True)]
        group = placement_group(bundles, spec["strategy"], bundle_label_selector=selectors)
    else:
        group = placement_group(bundles, spec["strategy"])
    ready = group.ready()
    while not ray.wait([ready], timeout=POLL_S)[0]:
        if stop_asked.is_set():
            return STOPPED_EXIT
    runner_class = ray.remote(NodeRunner)
    runners = [
        runner_class.options(
            num_cpus=spec["cpus_per_node"],
            num_gpus=spec["gpus_per_node"],
            memory=spec["mem_bytes_per_node"],
            max_concurrency=4,  # `stop` while `run` waits
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, i),
        ).remote()
        for i in range(spec["nodes"])
    ]
    master = str(ray.get(_call(runners[0], "ip")))
    port = int(str(ray.get(_call(runners[0], "free_port"))))
    print(f"gpupool: gang placed; MASTER_ADDR={master} MASTER_PORT={port}", flush=True)
    runs = {_call(r, "run", spec, i, master, port): i for i, r in enumerate(runners)}
    outcome: int | None = None
    pending = list(runs)
    while pending:
        done, pending = ray.wait(pending, timeout=POLL_S)
        for ref in done:
            code = int(str(ray.get(ref)))
            if code != 0 and outcome is None:
                print(f"gpupool: node {runs[ref]} failed (exit {code}): stopping the gang")
                outcome = code
        if outcome is None and stop_asked.is_set():
            outcome = STOPPED_EXIT
        if outcome is None and deadline is not None and time.monotonic() >= deadline:
            print("gpupool: time limit reached: stopping the gang", flush=True)
            outcome = TIMEOUT_EXIT
        if outcome is not None:
            for runner in runners:
                _call(runner, "stop", spec["grace_s"])
            stop_by = time.monotonic() + spec["grace_s"] + 5
            while pending and time.monotonic() < stop_by:
                done, pending = ray.wait(pending, timeout=POLL_S)
            break
    return outcome or 0


if __name__ == "__main__":
    sys.exit(main())
