"""Crashes under load, for tests: a crowd of clients submitting while the daemon is killed,
jobs that record each run, and the checks (nothing acknowledged lost or doubled, no job run
twice, no GPU given to two jobs at once).

A recorded job is one bash process (no fork for the clock: `$EPOCHREALTIME`): it appends
`start ID RESTARTS GPUS TIME` to the runs file, optionally works, and appends `end ...`.
Each line is one O_APPEND write, so lines of jobs running at once never mix.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpupool.client import ApiError, Client, PoolUnreachable
from gpupool.spec import build_spec, spec_to_wire

_LINE = 'echo "{what} $GPUPOOL_JOB_ID $GPUPOOL_RESTART_COUNT $CUDA_VISIBLE_DEVICES $EPOCHREALTIME"'


def recorded_job(runs: Path, work: str = ":") -> list[str]:
    """The command of a job that notes its start and end in `runs` around `work` (shell)."""
    script = f"{_LINE.format(what='start')} >> {runs}; {work}; {_LINE.format(what='end')} >> {runs}"
    return ["/bin/bash", "-c", script]


@dataclass(frozen=True)
class Run:
    job_id: int
    restarts: int
    gpus: tuple[int, ...]
    start: float
    end: float | None


def read_runs(path: Path) -> dict[int, list[Run]]:
    """Every run of every recorded job, by job id, in the order they started."""
    starts: dict[tuple[int, int], tuple[tuple[int, ...], float]] = {}
    ends: dict[tuple[int, int], float] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    order: list[tuple[int, int]] = []
    for line in lines:
        what, job, restarts, gpus, at = line.split()
        key = (int(job), int(restarts))
        if what == "start":
            assert key not in starts, f"job {job} attempt {restarts} started twice: {line}"
            starts[key] = (tuple(int(g) for g in gpus.split(",")), float(at))
            order.append(key)
        else:
            ends[key] = float(at)
    runs: dict[int, list[Run]] = {}
    for key in order:
        gpus, start = starts[key]
        runs.setdefault(key[0], []).append(Run(key[0], key[1], gpus, start, ends.get(key)))
    return runs


def assert_each_ran_once(runs: dict[int, list[Run]], job_ids: list[int]) -> None:
    twice = {j: r for j, r in runs.items() if len(r) > 1}
    assert not twice, f"jobs that ran more than once: {twice}"
    never = sorted(set(job_ids) - set(runs))
    assert not never, f"acknowledged jobs that never ran: {never}"
    unfinished = [r[0] for r in runs.values() if r[0].end is None]
    assert not unfinished, f"runs without an end: {unfinished}"


def gpu_overlaps(runs: dict[int, list[Run]]) -> list[tuple[Run, Run]]:
    """Pairs of runs that held one GPU at the same time (a run holds its GPUs from its start
    to its end line; the daemon frees them only after the end)."""
    by_gpu: dict[int, list[Run]] = {}
    for run in itertools.chain.from_iterable(runs.values()):
        for gpu in run.gpus:
            by_gpu.setdefault(gpu, []).append(run)
    overlaps = []
    for held in by_gpu.values():
        held.sort(key=lambda r: r.start)
        for before, after in itertools.pairwise(held):
            if before.end is None or after.start < before.end:
                overlaps.append((before, after))
    return overlaps


@dataclass
class Crowd:
    """`clients` threads submitting `total` jobs between them (each with its own client),
    each submission under its own name and token. A submission that gets no answer (the
    daemon is down, or was killed while it answered) is sent again with the same token
    until it is acknowledged, as a user re-running `gpupool submit --token T` would: the
    pool must store it exactly once."""

    state_dir: Path
    total: int
    clients: int
    command: Callable[[int], list[str]]  # the command of submission number n
    gpus: Callable[[int], int] = lambda n: 1
    deadline_s: float = 300.0
    acknowledged: dict[str, int] = field(default_factory=dict)  # name -> job id
    resent: int = 0  # submissions sent again after no answer
    errors: list[str] = field(default_factory=list)  # refusals: none expected
    _next: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Crowd:
        self._threads = [threading.Thread(target=self._submit_all) for _ in range(self.clients)]
        for t in self._threads:
            t.start()
        return self

    def count(self) -> int:
        with self._lock:
            return len(self.acknowledged)

    def join(self) -> None:
        for t in self._threads:
            t.join(self.deadline_s)
        assert not any(t.is_alive() for t in self._threads), "submitters still running"
        assert self.errors == [], self.errors[:5]

    def _submit_all(self) -> None:
        client = Client(self.state_dir)
        end = time.monotonic() + self.deadline_s
        while (n := next(self._next)) < self.total:
            name, token = f"crowd-{n}", uuid.uuid4().hex
            spec = {"name": name, "command": self.command(n), "gpus": self.gpus(n)}
            wire = spec_to_wire(build_spec(spec, default_workdir="/"))
            while True:
                try:
                    job = client.submit(wire, token)
                    break
                except PoolUnreachable:  # down, restarting, or cut off: same token again
                    with self._lock:
                        self.resent += 1
                except ApiError as exc:
                    with self._lock:
                        self.errors.append(f"{name}: {exc}")
                    return
                if time.monotonic() > end:
                    with self._lock:
                        self.errors.append(f"{name}: no answer in {self.deadline_s} s")
                    return
                time.sleep(0.02)  # polling for the daemon to be back, with a deadline
            with self._lock:
                self.acknowledged[name] = job.id


def assert_stored_exactly_once(client: Client, acknowledged: dict[str, int]) -> None:
    """Every acknowledged submission is one job, with the id it was acknowledged with, and
    no submission was stored twice (jobs are told apart by name: each submission's own)."""
    by_name: dict[str, list[int]] = {}
    for job in client.jobs(include_finished=True):
        by_name.setdefault(job.name, []).append(job.id)
    missing = sorted(n for n in acknowledged if n not in by_name)
    assert not missing, f"acknowledged but not stored: {missing[:10]}"
    wrong = {n: by_name[n] for n, i in acknowledged.items() if by_name[n] != [i]}
    assert not wrong, f"stored otherwise than acknowledged (name: ids): {wrong}"
    doubled = {n: ids for n, ids in by_name.items() if n in acknowledged and len(ids) > 1}
    assert not doubled, f"stored twice: {doubled}"
