"""A project's CPU and memory limits (policy/room_limits.py, in the quota book): a job that
would take its project over one waits with `Quota` naming the project and the figures while
another project's job starts; a pass's own starts count; an ask over the limit alone is
`QuotaNeverFits` and refused at submit; jobs without --cpus/--mem hold none. Property: over
random pools, quotas and limits, no project goes over a limit through a pass's starts."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from policy_builders import GiB, node, pending, running
from test_policy_properties import SETTINGS
from test_policy_quota_properties import snapshots as quota_snapshots

from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy import Code, Snapshot, decide
from gpupool.policy.quota_feasibility import check_quota
from gpupool.policy.render import status_text
from gpupool.policy.status import Rule

NOW = 1000.0
BOX = node("box", 8, cpus=64, mem_gb=512)


def _job(job_id: int, gpus: int, cpus: int | None, mem_gb: int | None, project: str = "vision"):
    return replace(pending(job_id, gpus, cpus=cpus, mem_gb=mem_gb), project=project)


def test_a_job_over_its_project_s_cpu_limit_waits_naming_it_while_another_project_starts() -> None:
    projects = {"vision": Project("vision", cpu_limit=16), "nlp": Project("nlp")}
    held = replace(running(10, "box", (0,), cpus=12), project="vision")
    snap = Snapshot(
        (BOX,),
        pending=(_job(1, 1, 8, None), _job(2, 1, 8, None, "nlp")),
        running=(held,),
        projects=projects,
    )
    d = decide(snap, NOW)
    assert [s.job_id for s in d.starts] == [2]
    status = d.pending[1]
    assert (status.code, status.rule, status.project) == (Code.QUOTA, Rule.ROOM_LIMIT, "vision")
    assert "project vision: CPUs limit 16, its running jobs hold 12; this job asks for 8" in (
        status_text(status)
    )


def test_memory_limits_count_the_pass_s_own_starts() -> None:
    projects = {"vision": Project("vision", memory_limit_bytes=100 * GiB)}
    snap = Snapshot(
        (BOX,),
        pending=(_job(1, 1, None, 60), _job(2, 1, None, 60), _job(3, 1, None, None)),
        projects=projects,
    )
    d = decide(snap, NOW)
    started = sorted(s.job_id for s in d.starts)
    assert started in ([1, 3], [2, 3])  # one 60 GiB job; the job asking no memory holds none
    waiting = ({1, 2} - set(started)).pop()
    assert d.pending[waiting].rule is Rule.ROOM_LIMIT
    assert "memory limit 100GiB, its running jobs hold 60GiB" in status_text(d.pending[waiting])


def test_an_ask_over_the_limit_alone_never_fits_and_is_refused_at_submit() -> None:
    projects = {"vision": Project("vision", cpu_limit=4, memory_limit_bytes=8 * GiB)}
    d = decide(Snapshot((BOX,), pending=(_job(1, 0, 8, None),), projects=projects), NOW)
    assert (d.pending[1].code, d.pending[1].rule) == (Code.QUOTA_NEVER_FITS, Rule.NEVER_ROOM_LIMIT)
    refused = check_quota(Resources(0, mem_bytes=16 * GiB), True, 200, "vision", projects, (BOX,))
    assert refused is not None
    assert "has a memory limit of 8GiB; this job asks for 16GiB" in status_text(refused)
    assert check_quota(Resources(1, cpus=4), True, 200, "vision", projects, (BOX,)) is None


@st.composite
def limited_snapshots(draw: st.DrawFn) -> Snapshot:
    snap = draw(quota_snapshots())
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    nodes = tuple(replace(n, cpus=64, memory_bytes=512 * GiB) for n in snap.nodes)
    projects = {
        name: replace(
            p,
            cpu_limit=rnd.choice([None, 4, 8, 16]),
            memory_limit_bytes=rnd.choice([None, 16 * GiB, 64 * GiB]),
        )
        for name, p in snap.projects.items()
    }

    def asked(res: Resources) -> Resources:
        return replace(
            res,
            cpus=rnd.choice([None, 1, 2, 4, 8]),
            mem_bytes=rnd.choice([None, 4 * GiB, 16 * GiB, 32 * GiB]),
        )

    return replace(
        snap,
        nodes=nodes,
        pending=tuple(replace(j, resources=asked(j.resources)) for j in snap.pending),
        running=tuple(replace(r, resources=asked(r.resources)) for r in snap.running),
        projects=projects,
    )


@SETTINGS
@given(limited_snapshots())
def test_no_project_goes_over_its_cpu_or_memory_limit_through_a_pass(snap: Snapshot) -> None:
    d = decide(snap, NOW)
    cpus: dict[str, int] = defaultdict(int)
    mem: dict[str, int] = defaultdict(int)
    for r in snap.running:
        cpus[r.project] += r.resources.cpus or 0
        mem[r.project] += r.resources.mem_bytes or 0
    before = (dict(cpus), dict(mem))
    by_id = {j.id: j for j in snap.pending}
    for s in d.starts:
        job = by_id[s.job_id]
        cpus[job.project] += job.resources.cpus or 0
        mem[job.project] += job.resources.mem_bytes or 0
    for name, p in snap.projects.items():
        if p.cpu_limit is not None and cpus[name] > before[0].get(name, 0):
            assert cpus[name] <= p.cpu_limit, (name, d.starts)
        if p.memory_limit_bytes is not None and mem[name] > before[1].get(name, 0):
            assert mem[name] <= p.memory_limit_bytes, (name, d.starts)
