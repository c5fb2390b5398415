"""Project quotas, limits, weights and reclaim in `decide` (policy/quota.py, preemption.py).

Table-driven: projects + cluster + running jobs + pending jobs -> starts, waits (code and
words), preemptions (victim -> the job it is preempted for) and the reservation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pytest
from policy_builders import node, pending, running

from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy import Code, PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.render import preemption_text, status_text

LOW, NORMAL, HIGH = 100, 200, 300


def job(
    job_id: int, gpus: int, project: str, *, prio: int = NORMAL, preemptible: bool = True
) -> PendingJob:
    return replace(pending(job_id, gpus, prio=prio), project=project, preemptible=preemptible)


def run(
    job_id: int,
    node_name: str,
    gpus: list[int],
    project: str,
    *,
    prio: int = NORMAL,
    start: float = 0.0,
    preemptible: bool = True,
) -> RunningJob:
    base = running(job_id, node_name, gpus)
    return replace(base, project=project, priority=prio, start_time=start, preemptible=preemptible)


def projects(*ps: Project) -> dict[str, Project]:
    return {p.name: p for p in ps}


def full(node_name: str, project: str, first_id: int, count: int, **kw: object) -> list[RunningJob]:
    """`count` one-GPU jobs of `project` on GPUs 0.. of the node, ids from `first_id`, started
    at their id (so a higher id is younger)."""
    return [
        run(first_id + i, node_name, [i], project, start=float(first_id + i), **kw)  # type: ignore[arg-type]
        for i in range(count)
    ]


@dataclass(frozen=True)
class Case:
    id: str
    projects: Mapping[str, Project]
    nodes: tuple[Node, ...]
    pending: tuple[PendingJob, ...]
    running: tuple[RunningJob, ...] = ()
    starts: Mapping[int, str] = field(default_factory=dict)  # job -> node
    waits: Mapping[int, tuple[Code, tuple[str, ...]]] = field(default_factory=dict)
    preempted: Mapping[int, int] = field(default_factory=dict)  # victim -> for job
    reasons: tuple[str, ...] = ()  # in the preemption reasons
    reserved: int | None = None  # the job holding the reservation, if any


def wait(code: Code, *says: str) -> tuple[Code, tuple[str, ...]]:
    return (code, says)


BOX = (node("box", 4),)

CASES = [
    Case(
        "within its quota a non-preemptible job starts",
        projects(Project("vision", quota=4)),
        BOX,
        pending=(job(1, 2, "vision", preemptible=False),),
        starts={1: "box"},
    ),
    Case(
        "a preemptible job borrows idle GPUs above its quota",
        projects(Project("vision", quota=2)),
        BOX,
        running=(run(100, "box", [0, 1], "vision"),),
        pending=(job(1, 2, "vision"),),
        starts={1: "box"},
    ),
    Case(
        "a non-preemptible job may not borrow: Quota, and no reservation",
        projects(Project("vision", quota=4)),
        (node("box", 8),),
        running=tuple(full("box", "vision", 100, 4)),
        pending=(job(1, 1, "vision", preemptible=False), job(2, 8, "nlp")),
        waits={
            1: wait(Code.QUOTA, "project vision: quota 4, in use 4; borrowing needs --preemptible"),
            2: wait(Code.RESOURCES),
        },
        reserved=2,
    ),
    Case(
        "a project at its limit waits with Quota, even with idle GPUs",
        projects(Project("vision", quota=4, limit=8)),
        (node("a", 8), node("b", 8)),
        running=tuple(full("a", "vision", 100, 8)),
        pending=(job(1, 1, "vision"),),
        waits={1: wait(Code.QUOTA, "project vision: limit 8, in use 8")},
    ),
    Case(
        "a job that would take its project above its limit waits",
        projects(Project("vision", quota=4, limit=8)),
        (node("a", 8), node("b", 8)),
        running=tuple(full("a", "vision", 100, 7)),
        pending=(job(1, 2, "vision"), job(2, 1, "vision")),
        starts={2: "a"},
        waits={1: wait(Code.QUOTA, "project vision: limit 8, in use 7")},
    ),
    Case(
        "a fractional running job counts as its fraction",
        projects(Project("vision", limit=1)),
        BOX,
        running=(
            replace(
                run(100, "box", [0], "vision"),
                resources=Resources(gpus=1, gpu_fraction=0.5),
            ),
        ),
        pending=(job(1, 1, "vision"),),
        waits={1: wait(Code.QUOTA, "project vision: limit 1, in use 0.5")},
    ),
    Case(
        "only quota-0 projects: nothing is guaranteed, an interactive job runs as before",
        projects(Project("default")),
        BOX,
        pending=(job(1, 1, "default", prio=400, preemptible=False),),
        starts={1: "box"},
    ),
    Case(
        "a project missing from the snapshot has quota 0: it borrows only preemptibly "
        "(a non-preemptible job there never starts)",
        projects(Project("vision", quota=1)),
        BOX,
        pending=(job(1, 1, "other", preemptible=False), job(2, 1, "other")),
        starts={2: "box"},
        waits={1: wait(Code.QUOTA_NEVER_FITS, "project other has no guaranteed quota")},
    ),
    Case(
        "jobs within quota go before borrowers, even of a higher class",
        projects(Project("nlp", quota=2), Project("vision")),
        (node("box", 2),),
        pending=(job(1, 2, "vision", prio=HIGH), job(2, 2, "nlp")),
        starts={2: "box"},
        waits={1: wait(Code.RESOURCES)},
        reserved=1,
    ),
    Case(
        "borrowers share idle GPUs by weight: least borrowed per weight next",
        projects(Project("nlp", weight=1), Project("vision", weight=3), Project("ops", quota=1)),
        BOX,
        # nlp's jobs come first in the queue; by weight vision gets 3 of the 4 GPUs.
        pending=(
            *(job(i, 1, "nlp") for i in range(1, 5)),
            *(job(i, 1, "vision") for i in range(5, 9)),
        ),
        starts={1: "box", 5: "box", 6: "box", 7: "box"},
        waits={i: wait(Code.RESOURCES) for i in (2, 3, 4, 8)},
        reserved=2,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_quota_case(case: Case) -> None:
    check(case)


def check(case: Case) -> None:
    snap = Snapshot(case.nodes, case.pending, case.running, projects=case.projects)
    d = decide(snap, 1000.0)
    assert {s.job_id: s.node for s in d.starts} == dict(case.starts)
    assert {p.job_id: p.for_job_id for p in d.preemptions} == dict(case.preempted)
    for job_id, (code, says) in case.waits.items():
        status = d.pending[job_id]
        assert status.code is code, (job_id, status)
        for words in says:
            assert words in status_text(status), (job_id, status_text(status))
    reasons = " | ".join(preemption_text(p) for p in d.preemptions)
    for words in case.reasons:
        assert words in reasons
    assert [r.job_id for r in d.reservations] == ([] if case.reserved is None else [case.reserved])
    assert set(d.pending) | {s.job_id for s in d.starts} == {j.id for j in case.pending}


def test_no_projects_changes_nothing() -> None:
    """Quota-0 projects without limits leave the decision as without projects."""
    nodes = (node("a", 4), node("b", 8))
    pend = tuple(job(i, 1 + i % 4, ("x", "y")[i % 2], preemptible=i % 3 > 0) for i in range(20))
    run_ = (run(100, "a", [0, 1], "x"), run(101, "b", [4], "y"))
    plain = decide(Snapshot(nodes, pend, run_), 0.0)
    with_projects = Snapshot(nodes, pend, run_, projects=projects(Project("x"), Project("y")))
    assert decide(with_projects, 0.0) == plain
