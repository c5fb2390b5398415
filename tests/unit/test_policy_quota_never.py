"""Requests their project's quotas can never let start (policy/quota_feasibility.py): refused
at submit (`check_quota`), and told apart in a pass (`QuotaNeverFits`) from a wait that ends
(`Quota`) when quotas change under a pending job."""

from __future__ import annotations

from dataclasses import replace

import pytest
from policy_builders import node, pending, running

from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy import Code, Snapshot, check_quota, decide
from gpupool.policy.render import status_text

BOX = (node("box", 8),)
INTERACTIVE = 400


def projects(*ps: Project) -> dict[str, Project]:
    return {p.name: p for p in [Project("default"), *ps]}


@pytest.mark.parametrize(
    ("res", "preemptible", "project", "pool", "says"),
    [
        # Quotas in force (ml has one): a project without quota takes only preemptible jobs.
        (
            Resources(gpus=1),
            False,
            "default",
            projects(Project("ml", quota=2)),
            "project default has no guaranteed quota; a non-preemptible job runs only within "
            "quota: ask for --preemptible or use a project with quota",
        ),
        # More than its project's quota, non-preemptible: never within quota.
        (
            Resources(gpus=3),
            False,
            "ml",
            projects(Project("ml", quota=2)),
            "project ml has a quota of 2 GPUs; this non-preemptible job asks for 3, more than "
            "it could ever hold within quota: ask for --preemptible, for at most 2 GPUs, or "
            "use a project with a larger quota",
        ),
        # Above a limit, preemptible or not.
        (
            Resources(gpus=4),
            True,
            "ml",
            projects(Project("ml", quota=2, limit=3)),
            "project ml has a limit of 3 GPUs; this job asks for 4: ask for at most 3, use "
            "another project, or raise the limit (gpupool project set ml --limit 4)",
        ),
        # A half GPU against a quota of a quarter.
        (
            Resources(gpus=1, gpu_fraction=0.5),
            False,
            "ml",
            projects(Project("ml", quota=0.25)),
            "project ml has a quota of 0.25 GPUs; this non-preemptible job asks for 0.5",
        ),
    ],
)
def test_never_within_quota_is_refused_with_the_project_and_what_to_change(
    res: Resources, preemptible: bool, project: str, pool: dict[str, Project], says: str
) -> None:
    status = check_quota(res, preemptible, 200, project, pool, BOX)
    assert status is not None and status.code is Code.QUOTA_NEVER_FITS
    assert says in status_text(status)
    assert status.unresolvable


@pytest.mark.parametrize(
    ("res", "preemptible", "project", "pool"),
    [
        (Resources(gpus=1), False, "default", projects()),  # no quota anywhere: queue order
        (Resources(gpus=8), False, "default", projects(Project("ml", limit=8))),  # limits only
        (Resources(gpus=1), True, "default", projects(Project("ml", quota=2))),  # borrows
        (Resources(gpus=2), False, "ml", projects(Project("ml", quota=2))),  # within quota
        (Resources(gpus=3), True, "ml", projects(Project("ml", quota=2, limit=3))),
        (Resources(gpus=0, cpus=4), False, "default", projects(Project("ml", quota=2))),
        (Resources(gpus=1), False, "ghost", projects()),  # unknown: refused elsewhere
    ],
)
def test_a_request_that_can_start_some_day_is_not_refused(
    res: Resources, preemptible: bool, project: str, pool: dict[str, Project]
) -> None:
    assert check_quota(res, preemptible, 200, project, pool, BOX) is None


def test_an_interactive_job_is_told_that_interactive_is_not_preemptible() -> None:
    status = check_quota(
        Resources(gpus=1), False, INTERACTIVE, "default", projects(Project("ml", quota=1)), BOX
    )
    assert status is not None and "interactive jobs are not preemptible" in status_text(status)


def test_a_pass_tells_a_job_its_quota_can_never_fit_from_one_that_waits_its_turn() -> None:
    """After the quotas changed under them: job 1 (non-preemptible, 2 GPUs, ml's quota now 1)
    can never start; job 2 (non-preemptible, 1 GPU, within quota but ml's GPU is in use)
    waits for its turn; job 3 (no quota, interactive) can never start either."""
    run = replace(running(10, "box", [0]), project="ml", preemptible=False)
    jobs = (
        replace(pending(1, 2), project="ml", preemptible=False),
        replace(pending(2, 1), project="ml", preemptible=False),
        replace(pending(3, 1, prio=INTERACTIVE), preemptible=False),
    )
    snap = Snapshot(BOX, jobs, (run,), projects=projects(Project("ml", quota=1)))
    d = decide(snap, 0.0)
    assert d.starts == ()
    assert d.pending[1].code is Code.QUOTA_NEVER_FITS
    assert "project ml has a quota of 1 GPUs; this non-preemptible job asks for 2" in (
        status_text(d.pending[1])
    )
    assert d.pending[2].code is Code.QUOTA
    assert d.pending[3].code is Code.QUOTA_NEVER_FITS
    never = check_quota(Resources(gpus=1), False, INTERACTIVE, "default", snap.projects, BOX)
    assert never is not None and status_text(d.pending[3]) == status_text(never)
