"""Per-user caps inside a project (policy/user_caps.py, in the quota book): a user at the cap
waits with `Quota` naming them while a teammate starts; a cap of running jobs; a pass's own
starts count; an ask over the cap alone is `QuotaNeverFits` and refused at submit; the pool's
default where a project sets none; no reclaim or preemption for a job its user's cap holds.
Property: over random pools, quotas, users and caps, no user goes past a cap through a pass's
starts."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from policy_builders import node, pending, running
from test_policy_properties import SETTINGS
from test_policy_quota_properties import snapshots as quota_snapshots

from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy import Code, Snapshot, decide
from gpupool.policy.quota_feasibility import check_quota
from gpupool.policy.render import status_text
from gpupool.policy.snapshot import PolicyConfig
from gpupool.policy.status import Rule

NOW = 1000.0
USERS = ("ann", "bo", "cy")


def _job(job_id: int, gpus: int, user: str, project: str = "vision", **kw: object):
    return replace(pending(job_id, gpus), user=user, project=project, **kw)


def _run(job_id: int, gpus: tuple[int, ...], user: str, project: str = "vision"):
    return replace(running(job_id, "box", gpus), user=user, project=project)


def test_a_user_at_the_gpu_cap_waits_naming_them_while_a_teammate_starts() -> None:
    projects = {"vision": Project("vision", max_gpus_per_user=2)}
    snap = Snapshot(
        (node("box", 8),),
        pending=(_job(1, 1, "ann"), _job(2, 1, "bo")),
        running=(_run(10, (0, 1), "ann"),),
        projects=projects,
    )
    d = decide(snap, NOW)
    assert [s.job_id for s in d.starts] == [2]
    held = d.pending[1]
    assert (held.code, held.rule, held.user, held.project) == (
        Code.QUOTA,
        Rule.USER_GPUS,
        "ann",
        "vision",
    )
    words = status_text(held)
    assert "user ann already holds 2 GPUs in project vision" in words
    assert "per-user cap is 2" in words


def test_a_pass_counts_its_own_starts_against_the_cap() -> None:
    projects = {"vision": Project("vision", max_gpus_per_user=3)}
    snap = Snapshot(
        (node("box", 8),),
        pending=(_job(1, 2, "ann"), _job(2, 2, "ann"), _job(3, 1, "ann")),
        projects=projects,
    )
    d = decide(snap, NOW)
    assert sorted(s.job_id for s in d.starts) == [1, 3]  # 2 + 1: job 2 would make 4
    assert d.pending[2].rule is Rule.USER_GPUS


def test_a_cap_of_running_jobs() -> None:
    projects = {"vision": Project("vision", max_running_jobs_per_user=2)}
    snap = Snapshot(
        (node("box", 8, cpus=8),),
        pending=(_job(1, 1, "ann"), _job(2, 0, "ann", resources=Resources(0, cpus=1))),
        running=(_run(10, (0,), "ann"),),
        projects=projects,
    )
    d = decide(snap, NOW)
    (started,) = [s.job_id for s in d.starts]  # one of the two: a CPU-only job counts too
    held = d.pending[3 - started]
    assert (held.rule, held.limit) == (Rule.USER_JOBS, 2)
    assert "user ann already runs 2 jobs in project vision" in status_text(held)


def test_an_ask_over_the_cap_alone_never_fits_and_is_refused_at_submit() -> None:
    projects = {"vision": Project("vision", max_gpus_per_user=2)}
    snap = Snapshot((node("box", 8),), pending=(_job(1, 4, "ann"),), projects=projects)
    held = decide(snap, NOW).pending[1]
    assert (held.code, held.rule) == (Code.QUOTA_NEVER_FITS, Rule.NEVER_USER_GPUS)
    refused = check_quota(Resources(4), True, 200, "vision", projects, snap.nodes)
    assert refused is not None and refused.rule is Rule.NEVER_USER_GPUS
    assert "lets one user hold at most 2 GPUs; this job asks for 4" in status_text(refused)
    assert check_quota(Resources(2), True, 200, "vision", projects, snap.nodes) is None


def test_the_pool_default_applies_where_a_project_sets_none() -> None:
    projects = {"vision": Project("vision"), "nlp": Project("nlp", max_gpus_per_user=4)}
    config = PolicyConfig(max_gpus_per_user=1)
    snap = Snapshot(
        (node("box", 8),),
        pending=(_job(1, 1, "ann"), _job(2, 1, "ann"), _job(3, 3, "ann", project="nlp")),
        projects=projects,
        config=config,
    )
    d = decide(snap, NOW)
    assert sorted(s.job_id for s in d.starts) == [1, 3]  # nlp's own cap of 4 wins there
    assert d.pending[2].rule is Rule.USER_GPUS
    refused = check_quota(Resources(2), True, 200, "vision", projects, snap.nodes, config)
    assert refused is not None and refused.rule is Rule.NEVER_USER_GPUS


def test_no_reclaim_for_a_job_its_user_s_cap_holds() -> None:
    """Project vision is under its quota, but its user is at the per-user cap: nothing is
    reclaimed from the borrower."""
    projects = {
        "vision": Project("vision", quota=4, max_gpus_per_user=1),
        "other": Project("other"),
    }
    snap = Snapshot(
        (node("box", 2),),
        pending=(_job(1, 1, "ann"),),
        running=(_run(10, (0,), "ann"), _run(11, (1,), "bo", project="other")),
        projects=projects,
    )
    d = decide(snap, NOW)
    assert not d.preemptions and not d.starts
    assert d.pending[1].rule is Rule.USER_GPUS


@st.composite
def capped_snapshots(draw: st.DrawFn) -> Snapshot:
    snap = draw(quota_snapshots())
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    projects = {
        name: replace(
            p,
            max_gpus_per_user=rnd.choice([None, 1, 2, 3]),
            max_running_jobs_per_user=rnd.choice([None, 1, 2]),
        )
        for name, p in snap.projects.items()
    }
    config = PolicyConfig(max_gpus_per_user=rnd.choice([None, None, 2]))
    return replace(
        snap,
        pending=tuple(replace(j, user=rnd.choice(USERS)) for j in snap.pending),
        running=tuple(replace(r, user=rnd.choice(USERS)) for r in snap.running),
        projects=projects,
        config=config,
    )


@SETTINGS
@given(capped_snapshots())
def test_no_user_goes_past_a_cap_through_a_pass_s_starts(snap: Snapshot) -> None:
    d = decide(snap, NOW)
    gpus: dict[tuple[str, str], float] = defaultdict(float)
    jobs: dict[tuple[str, str], int] = defaultdict(int)
    for r in snap.running:
        gpus[(r.project, r.user)] += len(r.gpus)
        jobs[(r.project, r.user)] += 1
    by_id = {j.id: j for j in snap.pending}
    started: set[tuple[str, str]] = set()
    for s in d.starts:
        job = by_id[s.job_id]
        key = (job.project, job.user)
        gpus[key] += job.resources.gpus
        jobs[key] += 1
        started.add(key)
    for key in started:
        p = snap.projects.get(key[0])
        gpu_cap = (p.max_gpus_per_user if p else None) or snap.config.max_gpus_per_user
        job_cap = p.max_running_jobs_per_user if p else None
        if gpu_cap is not None:
            assert gpus[key] <= gpu_cap + 1e-9 or _was_over(snap, key, gpu_cap), (key, d.starts)
        if job_cap is not None:
            assert jobs[key] <= job_cap or _jobs_before(snap, key) >= job_cap, (key, d.starts)


def _was_over(snap: Snapshot, key: tuple[str, str], cap: float) -> bool:
    return sum(len(r.gpus) for r in snap.running if (r.project, r.user) == key) > cap


def _jobs_before(snap: Snapshot, key: tuple[str, str]) -> int:
    return sum(1 for r in snap.running if (r.project, r.user) == key)
