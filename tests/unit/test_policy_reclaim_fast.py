"""Reclaim's node search (policy/reclaim.py) against the plain rule.

`ReclaimPlanner.plan` works out bounds only for the nodes where borrowers have candidates, lowest
first and lazily, and stops once no node can beat the best plan found. `Plain` does what the
module docstring says and nothing more: every node, every candidate, the per-node rule, the
best rank. Whole decisions must be the same, over random clusters, projects, borrowers, ties,
priorities, GPU types, fractional and spread jobs, CPUs, and times that are not whole numbers.
"""

from __future__ import annotations

import importlib
import itertools
import random
from dataclasses import replace
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_builders import GiB

from gpupool.core.hardware import Gpu, Node
from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy import PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.backfill import Shadow
from gpupool.policy.node_free import NodeFree
from gpupool.policy.placement import place
from gpupool.policy.reclaim import ReclaimPlanner, _bound
from gpupool.policy.request import request_key
from gpupool.policy.snapshot import PolicyConfig
from gpupool.policy.victims import Plan, hold

PASS = importlib.import_module("gpupool.policy.scheduling_pass")  # where the planner is made
NOW = 1000.0
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODELS = ("A100-80GB", "NVIDIA H100 80GB HBM3")
CONFIG = PolicyConfig()  # the snapshots' (checkpoint_loss_s)


class Plain(ReclaimPlanner):
    """The reference: every node tried, with its candidates as the module docstring says."""

    def plan(self, job: PendingJob, frees: list[NodeFree], shadow: Shadow | None) -> Plan | None:
        res = job.resources
        key = (request_key(res), job.project)
        if key in self.failed:
            return None
        share = {name: self._share(name) for name in self.book.in_use}
        best = None
        for whole in (False, True):  # jobs borrowing in part only where nothing else does
            if best is None:
                best = self._plain_best(job, frees, shadow, share, whole)
        if best is None:
            self.failed.add(key)
            return None
        _, view, victims, free = best
        placement = place([view], res)
        assert placement is not None
        return hold(res, placement, victims, free)

    def _ran_its_floor(self, r: RunningJob) -> bool:
        """It ran its project's `reclaim_min_runtime_s` (none set: no floor)."""
        return NOW - r.start_time >= (self.book.project(r.project).reclaim_min_runtime_s or 0.0)

    def _plain_best(
        self,
        job: PendingJob,
        frees: list[NodeFree],
        shadow: Shadow | None,
        share: dict[str, float],
        whole: bool,
    ) -> tuple[tuple[int, float, int, int, str], NodeFree, tuple[RunningJob, ...], NodeFree] | None:
        best = None
        for free in frees:
            mine = sorted(
                (
                    r
                    for r in self._running
                    if r.node == free.node.name
                    and r.preemptible
                    and (r.time_limit_s is None or r.start_time + r.time_limit_s > NOW + 3600.0)
                    and self._ran_its_floor(r)
                    and r.project != job.project
                    and share[r.project] > 0
                    and r.id not in self.taken
                ),
                key=lambda r: (r.priority, -share[r.project], -r.start_time, -r.id),
            )
            found = self._on_node(job, free, shadow, mine, whole) if mine else None
            if found is not None:
                victims = found[1]
                rank = (
                    max(v.priority for v in victims),
                    sum(whole_gpus(v, self._running) * lost_s(v) for v in victims),
                    len(victims),
                    sum(len(v.gpus) for v in victims),
                    free.node.name,
                )
                if best is None or rank < best[0]:
                    best = (rank, found[0], victims, free)
        return best


def lost_s(r: RunningJob) -> float:
    """The seconds of work stopping `r` throws away: its attempt, at most the last
    `checkpoint_loss_s` of it when it checkpoints (policy/victim_cost.py)."""
    run = max(0.0, NOW - r.start_time)
    return min(run, CONFIG.checkpoint_loss_s) if r.checkpointing else run


def whole_gpus(r: RunningJob, running: tuple[RunningJob, ...]) -> int:
    """The GPUs of the whole job `r` is a row of: a job spread over nodes is stopped whole
    (a fractional job counts its one GPU)."""
    return sum(len(x.gpus) for x in running if x.id == r.id)


def both(snap: Snapshot) -> None:
    fast = decide(snap, NOW)
    with patch.object(PASS, "ReclaimPlanner", Plain):
        plain = decide(snap, NOW)
    assert fast == plain


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    names = [f"p{i}" for i in range(rnd.randint(2, 5))]
    projects = {
        n: Project(
            n,
            quota=rnd.choice([0, 0, 1, 2, 4, 8]),
            weight=rnd.choice([0.5, 1, 1, 3]),
            reclaim_min_runtime_s=rnd.choice([None, None, None, 0.0, 200.0, 600.0]),
        )
        for n in names
    }
    projects[names[0]] = Project(names[0], quota=rnd.choice([4, 8, 16]))  # one to claim for
    # Few distinct start times and sizes: many nodes tie; fractions of a second: bounds that
    # are not whole numbers.
    starts = [float(rnd.randint(0, 1100)) for _ in range(rnd.randint(1, 4))]
    if rnd.random() < 0.3:
        starts += [s + rnd.choice([0.1, 0.25, 1 / 3]) for s in starts]
    with_cpus = rnd.random() < 0.3
    nodes = [
        Node(
            f"n{i:02}",
            tuple(Gpu(g, model, 80 * GiB) for g in range(rnd.choice([2, 4, 8, 8]))),
            cpus=64 if with_cpus else 0,
        )
        for i in range(rnd.randint(1, 14))
        for model in [rnd.choice(MODELS)]
    ]
    frees = {n.name: rnd.sample(range(len(n.gpus)), len(n.gpus)) for n in nodes}
    running: list[RunningJob] = []
    ids = itertools.count(1000)
    if len(nodes) > 1 and rnd.random() < 0.3:  # a job spread over two nodes
        spread = run(rnd, next(ids), "", (), names, starts)
        for n in rnd.sample(nodes, 2):
            held, frees[n.name] = frees[n.name][:2], frees[n.name][2:]
            running.append(replace(spread, node=n.name, gpus=tuple(held),
                                   resources=Resources(gpus=len(held))))  # fmt: skip
    for n in nodes:
        free = frees[n.name]
        while free and rnd.random() < 0.97:
            if rnd.random() < 0.1:  # fractional jobs sharing one GPU
                g = free.pop()
                for _ in range(rnd.randint(1, 2)):
                    running.append(run(rnd, next(ids), n.name, (g,), names, starts, 0.5))
                continue
            size = min(len(free), rnd.choice([1, 1, 2, 4, 8]))
            held, free = tuple(sorted(free[:size])), free[size:]
            cpus = rnd.choice([None, 4, 8]) if with_cpus else None
            running.append(run(rnd, next(ids), n.name, held, names, starts, cpus=cpus))
    pending = []
    for j in range(1, rnd.randint(2, 14)):
        res = Resources(
            gpus=rnd.choice([1, 1, 2, 3, 4, 8]),
            gpu_type=rnd.choice([None, None, None, "H100"]),
            cpus=rnd.choice([None, 8, 48]) if with_cpus else None,
        )
        if rnd.random() < 0.1:
            res = Resources(gpus=1, gpu_type=res.gpu_type, cpus=res.cpus, gpu_fraction=0.5)
        project = rnd.choice([names[0], names[0], *names])
        pending.append(PendingJob(j, res, rnd.choice([200, 200, 300]), float(j), project=project))
    return Snapshot(tuple(nodes), tuple(pending), tuple(running), projects=projects)


def run(
    rnd: random.Random,
    job_id: int,
    node_name: str,
    gpus: tuple[int, ...],
    names: list[str],
    starts: list[float],
    fraction: float | None = None,
    cpus: int | None = None,
) -> RunningJob:
    """A running job, mostly of a project other than the first (the borrowers)."""
    res = Resources(gpus=len(gpus), cpus=cpus)
    if fraction is not None:
        res = Resources(gpus=1, gpu_fraction=fraction)
    return RunningJob(
        job_id,
        node_name,
        gpus,
        res,
        start_time=rnd.choice(starts),
        priority=rnd.choice([100, 200, 200, 200, 300]),
        project=rnd.choice(names[1:] * 3 + names[:1]),
        time_limit_s=rnd.choice([None, None, None, 1500.0, 9000.0]),
        preemptible=rnd.random() < 0.9,
        gpu_memory_bytes=None if fraction is None else int(fraction * 80 * GiB),
        checkpointing=rnd.random() < 0.3,
    )


@SETTINGS
@given(snapshots())
def test_decisions_are_those_of_trying_every_node(snap: Snapshot) -> None:
    both(snap)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([100, 200, 300]),
            st.integers(0, 8),
            st.sampled_from([0.0, 100.0, 400.0, 400.5, 700.0, 999.75, 1000.0, 1200.0]),
            st.booleans(),  # it checkpoints: it loses at most `checkpoint_loss_s` of its run
        ),
        min_size=1,
        max_size=7,
    ),
    st.integers(-2, 12),
)
def test_bound_is_the_best_set_of_victims(
    jobs: list[tuple[int, int, float, bool]], lacks: int
) -> None:
    """`_bound` is at most the rank of every set of candidates that holds `lacks` GPUs (and
    equal to the best one when the work lost is in whole GPU-seconds); None when none does."""
    mine = [
        RunningJob(i, "n", tuple(range(n)), Resources(gpus=n), start, prio, checkpointing=saves)
        for i, (prio, n, start, saves) in enumerate(jobs)
    ]
    mine.sort(key=lambda r: (r.priority, -r.start_time))
    ranks = []
    for k in range(1, len(mine) + 1):
        for victims in itertools.combinations(mine, k):
            if sum(len(v.gpus) for v in victims) >= lacks:
                lost = sum(len(v.gpus) * lost_s(v) for v in victims)
                ranks.append(
                    (max(v.priority for v in victims), lost, k, sum(len(v.gpus) for v in victims))
                )
    bound = _bound(mine, lacks, NOW, CONFIG)
    if not ranks:
        assert bound is None
        return
    assert bound is not None and bound <= min(ranks)
    if all(float(lost_s(r)).is_integer() for r in mine):
        assert bound == min(ranks)


def cluster(count: int) -> tuple[Node, ...]:
    return tuple(
        Node(f"n{i:03}", tuple(Gpu(g, MODELS[0], 80 * GiB) for g in range(8))) for i in range(count)
    )


def borrowed(count: int, young: int | None) -> tuple[RunningJob, ...]:
    """Every node full with one 8-GPU job of project b started at 0; on node `young`, eight
    1-GPU jobs instead, started at 900."""
    jobs = []
    for i in range(count):
        if i == young:
            jobs += [
                RunningJob(10_000 + g, f"n{i:03}", (g,), Resources(gpus=1), 900.0, project="b")
                for g in range(8)
            ]
        else:
            jobs.append(
                RunningJob(i, f"n{i:03}", tuple(range(8)), Resources(gpus=8), 0.0, project="b")
            )
    return tuple(jobs)


ON_NODE = ReclaimPlanner._on_node


def test_a_reclaim_on_a_big_cluster_tries_few_nodes() -> None:
    projects = {"a": Project("a", quota=4), "b": Project("b")}
    for young in (None, 137):  # all nodes tie (the first by name wins), or one is best
        snap = Snapshot(
            cluster(300),
            (PendingJob(1, Resources(gpus=1), 200, 0.0, project="a"),),
            borrowed(300, young),
            projects=projects,
        )
        with patch.object(
            ReclaimPlanner, "_on_node", autospec=True, side_effect=ON_NODE
        ) as on_node:
            d = decide(snap, NOW)
        tried = [call.args[2].node.name for call in on_node.call_args_list]
        assert [p.job_id for p in d.preemptions] == ([0] if young is None else [10_007])
        assert tried == ["n000" if young is None else "n137"]
        both(snap)
