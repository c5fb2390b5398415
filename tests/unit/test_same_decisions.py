"""The simulator and the daemon decide alike on the same jobs.

Both build `decide`'s inputs with one builder (policy/inputs.py); this replays one job set
through both and compares what they did: (a) the trace replay (sim/engine.py), and (b) the
daemon's real `Engine` (engine/loop.py) with its real store (SQLite) on a fake clock, with an
executor that runs nothing: a run ends `duration` seconds after its launch, or at once when
it is preempted.

The engine is stepped as the replay is: at every event time (an arrival, or the end of a run
the executor holds) the clock is set, the arrivals are stored, and one pass runs; after a
pass that preempted, the victims' exits are taken in and one more pass runs at the same time,
as the replay re-decides at once. The replay is run as the daemon runs: its default policy
(`PolicyConfig()`), the jobs' own --time as their limits (estimates "none"), no restart
overhead (a requeued job runs its whole duration again, as the executor does).

What is compared is every start (time, job, node, GPUs) and every preemption (time, job):
the same list, or the two have drifted apart. The job sets are built to need every part of
a pass: queueing, backfill (a job starting before one submitted earlier), quota reclaim
(preemptions) and fair share between three projects and three users. Quota reclaim is
compared with fair share off and on, fair share without quotas too.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from gpupool.core.clock import FakeClock
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
from gpupool.core.hardware import Inventory
from gpupool.core.job import JobSpec, Resources
from gpupool.core.project import Project
from gpupool.engine import Engine
from gpupool.policy.inputs import placed
from gpupool.policy.snapshot import PolicyConfig, PriorityWeights, Start
from gpupool.sim.clusters import uniform_cluster
from gpupool.sim.engine import Replay, SimOptions, _Job
from gpupool.sim.model import SimCluster, Trace, TraceJob
from gpupool.store import Store

# (time, "start", job, ((node, GPUs), ...)) or (time, "preempt", job, ())
Act = tuple[float, str, int, tuple[tuple[str, tuple[int, ...]], ...]]

# Quotas: vision and nlp guaranteed 4 and 3 of the 8 GPUs; speech only borrows.
QUOTAS = (Project("vision", quota=4.0), Project("nlp", quota=3.0), Project("speech"))
NO_QUOTAS = tuple(Project(p.name) for p in QUOTAS)
USERS = ("alice", "bob", "carol")
DAEMON = PolicyConfig()  # what the daemon runs
# The same without fair share: reclaim alone.
NO_FAIR_SHARE = replace(DAEMON, weights=PriorityWeights(fairshare=0.0))


def _jobs(count: int = 48, seed: int = 31) -> Trace:
    """Mixed widths (1-4 GPUs), projects and users; mostly short jobs with some long ones
    (long borrowers are what quota reclaim preempts: it spares one about to end); limits
    above the run time. Whole seconds, so both sides add the same floats."""
    rng = random.Random(seed)
    jobs, t = [], 0
    for i in range(1, count + 1):
        t += rng.choice((0, 0, 30, 60, 120, 300, 600))
        long = rng.random() < 0.3
        duration = rng.randint(4000, 12000) if long else rng.randint(120, 1800)
        limit = int(duration * rng.uniform(1.1, 2.0))
        gpus = rng.choice((1, 1, 2, 2, 3, 4))
        project = rng.choice(("vision", "nlp", "speech"))
        user = rng.choice(USERS)
        jobs.append(TraceJob(i, float(t), float(duration), gpus, user, project, float(limit)))
    return Trace(tuple(jobs))


def _cluster(projects: tuple[Project, ...]) -> SimCluster:
    """Two nodes of four GPUs: the replay's cluster, and the daemon's declared inventory."""
    made = uniform_cluster(2, 4, model="A100-80GB")
    return SimCluster(made.name, made.nodes, {p.name: p for p in projects})


# --- (a) the replay ---------------------------------------------------------------------


class _RecordingReplay(Replay):
    """The replay, writing down every start and preemption as it applies it."""

    acts: list[Act]

    def _start(self, job: _Job, start: Start, now: float) -> None:
        super()._start(job, start, now)
        self.acts.append((now, "start", job.trace.id, placed(start)))

    def _preempt(self, job: _Job, now: float) -> None:
        self.acts.append((now, "preempt", job.trace.id, ()))
        super()._preempt(job, now)


def _replayed(trace: Trace, cluster: SimCluster, config: PolicyConfig) -> list[Act]:
    options = SimOptions(
        estimates="none", restart_overhead_s=0.0, interval_s=0.0, check_running_view=True
    )
    replay = _RecordingReplay(trace, cluster, config, "default", options)
    replay.acts = []
    result = replay.run()
    assert result.refused == 0
    assert all(r.end_s is not None for r in result.records)
    return replay.acts


# --- (b) the daemon's engine ------------------------------------------------------------


class _Run:
    __slots__ = ("end", "released", "start", "stopped")

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.stopped: float | None = None  # when it was preempted
        self.released = False


class ClockExecutor:
    """An executor that runs nothing, on the engine's clock: a run launched at `s` is
    RUNNING until `s + duration` of its job, then EXITED with code 0; one signalled to stop
    is EXITED at once (PREEMPTED for a preemption). It writes down what it launched where
    and what it was told to preempt."""

    def __init__(self, clock: FakeClock, durations: Mapping[int, float]) -> None:
        self.clock = clock
        self.durations = durations
        self.runs: dict[Handle, _Run] = {}
        self.acts: list[Act] = []
        self.unseen_stops = 0  # preempted runs whose exit no poll has reported yet

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities()

    def container_engines(self) -> Sequence[ContainerEngine]:
        return ()

    def launch(self, request: LaunchRequest) -> None:
        handle, now = request.handle, self.clock.now()
        if handle in self.runs:
            return
        self.runs[handle] = _Run(now, now + self.durations[handle.job_id])
        where = request.allocation
        self.acts.append((now, "start", handle.job_id, ((where.node, where.gpus),)))

    def poll(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        now, seen = self.clock.now(), {}
        for handle in handles:
            run = self.runs.get(handle)
            if run is None:
                seen[handle] = Observation(RunState.UNLAUNCHED)
            elif run.released:
                seen[handle] = Observation(RunState.RELEASED)
            elif run.stopped is not None:
                record = ExitRecord(143, 15, ExitReason.PREEMPTED, run.start, run.stopped, "")
                seen[handle] = Observation(RunState.EXITED, record)
            elif now >= run.end:
                record = ExitRecord(0, None, ExitReason.EXITED, run.start, run.end, "")
                seen[handle] = Observation(RunState.EXITED, record)
            else:
                seen[handle] = Observation(RunState.RUNNING)
        return seen

    def adopt(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        return self.poll(handles)

    def signal(self, handle: Handle, kind: StopKind) -> bool:
        run = self.runs.get(handle)
        now = self.clock.now()
        if run is None or run.stopped is not None or now >= run.end:
            return False
        assert kind is StopKind.PREEMPT, "the job set cancels nothing"
        run.stopped = now
        self.unseen_stops += 1
        self.acts.append((now, "preempt", handle.job_id, ()))
        return True

    def set_time_limit(self, handle: Handle, seconds: float) -> bool:
        return False

    def send_signal(self, handle: Handle, signum: int) -> bool:
        return False

    def release(self, handle: Handle) -> bool:
        run = self.runs[handle]
        if run.stopped is not None and not run.released:
            self.unseen_stops -= 1
        run.released = True
        return True

    def settle_lost(self, handle: Handle, wait_s: float) -> Leftovers:
        return Leftovers(None)

    def logs(
        self, handle: Handle, offset: int, limit: int, rank: int | None = None, stderr: bool = False
    ) -> LogChunk:
        return LogChunk(b"", offset)

    def log_location(self, job_id: int) -> str:
        return ""

    @property
    def data_dir(self) -> Path | None:
        return None

    def close(self) -> None: ...

    def next_end(self) -> float:
        """When the next run still going ends (inf: none)."""
        now = self.clock.now()
        ends = [r.end for r in self.runs.values() if r.stopped is None and r.end > now]
        return min(ends, default=math.inf)


def _engine_ran(
    trace: Trace, cluster: SimCluster, config: PolicyConfig, tmp_path: Path
) -> list[Act]:
    clock = FakeClock(0.0)
    executor = ClockExecutor(clock, {tj.id: tj.duration_s for tj in trace.jobs})
    store = Store.open(f"sqlite:///{tmp_path / 'state' / 'state.db'}")
    try:
        for project in cluster.projects.values():
            store.create_project(project)
        inventory = Inventory(cluster.nodes, source="declared")
        # Fair share read afresh at every pass, as the replay's is.
        engine = Engine(store, executor, inventory, clock=clock, config=config, usage_refresh_s=0)
        engine.recover()
        arrivals = list(trace.jobs)
        while arrivals or executor.next_end() < math.inf:
            now = min(arrivals[0].submit_s if arrivals else math.inf, executor.next_end())
            clock.set(now)
            while arrivals and arrivals[0].submit_s <= now:
                tj = arrivals.pop(0)
                spec = JobSpec(
                    command=("train",),
                    resources=Resources(gpus=tj.gpus),
                    project=tj.project,
                    time_limit_s=tj.time_limit_s,
                    workdir="/",
                )
                job = store.submit(spec, tj.user, now)
                assert job.id == tj.id  # the store numbers them as the trace does
                engine.stored(job)
            engine.run_pass()
            for _ in range(64):  # victims exit at once: requeue them and decide again
                if not executor.unseen_stops:
                    break
                engine.run_pass()
            assert not executor.unseen_stops
        assert all(j.state.terminal for j in store.list_jobs(include_finished=True))
    finally:
        store.close()
    return executor.acts


def _compare(
    seed: int, projects: tuple[Project, ...], config: PolicyConfig, tmp_path: Path
) -> list[Act]:
    """Replay the job set of `seed` through both; their acts, once checked equal."""
    trace, cluster = _jobs(seed=seed), _cluster(projects)
    replayed = _replayed(trace, cluster, config)
    ran = _engine_ran(trace, cluster, config, tmp_path)
    # Within one instant the replay preempts before it starts, the engine after its starts
    # are committed: compared in time order, each instant's acts sorted.
    assert sorted(ran) == sorted(replayed)
    assert len({job for _, kind, job, _ in ran if kind == "start"}) == len(trace.jobs)
    return replayed


def _out_of_order(acts: list[Act]) -> bool:
    """Some job started before one submitted earlier (ids are in submit order): backfill,
    or a quota's turn."""
    starts = [job for _, kind, job, _ in acts if kind == "start"]
    return starts != sorted(starts)


@pytest.mark.parametrize("seed", [31, 4, 9])
def test_the_replay_and_the_daemons_engine_decide_alike_under_quotas(
    seed: int, tmp_path: Path
) -> None:
    acts = _compare(seed, QUOTAS, NO_FAIR_SHARE, tmp_path)
    # The job set needs every part of a pass, else agreeing would prove little.
    assert _out_of_order(acts)
    assert any(kind == "preempt" for _, kind, _, _ in acts)  # quota reclaim


@pytest.mark.parametrize("seed", [31, 4])
def test_the_replay_and_the_daemons_engine_decide_alike_by_fair_share(
    seed: int, tmp_path: Path
) -> None:
    """The daemon's own config, fair share on. No quotas, so nothing is preempted: what
    the two count of each project's and user's usage is then the same."""
    acts = _compare(seed, NO_QUOTAS, DAEMON, tmp_path)
    assert _out_of_order(acts)
    assert not any(kind == "preempt" for _, kind, _, _ in acts)


@pytest.mark.parametrize("seed", [31, 4, 9])
def test_the_replay_and_the_daemons_engine_decide_alike_by_fair_share_under_quotas(
    seed: int, tmp_path: Path
) -> None:
    """Quota reclaim and fair share together: a preempted run counts in the daemon's usage
    as in the replay's (store.usage_history adds a requeued job's earlier runs; before it
    did, only the last run of a job counted and the two drifted apart)."""
    acts = _compare(seed, QUOTAS, DAEMON, tmp_path)
    assert _out_of_order(acts)
    assert any(kind == "preempt" for _, kind, _, _ in acts)
