"""The guarantee, over random job shapes (issue 30, item 1): a project within its quota, with
preemptible borrowers elsewhere, waits at most one grace period (plus one pass).

One node (a reclaim places its job on one node: across nodes, fragmentation can leave the
borrowed GPUs too spread for it, which no victim choice mends), quotas that add up to at most
the node's GPUs, and running jobs of every shape: some projects within their quota, some above
it with jobs of any size, partly or wholly borrowed. Non-preemptible jobs stay within their
project's quota, as admission makes them (`policy/quota_feasibility.py`). No borrower is
within reclaim patience of its time limit (those are spared on purpose and waited for).

Then a pending job whose project stays within its quota with it starts now or reclaims
(`Reclaim`, with victims), and once its victims are gone (they exit within their grace
period) it starts in the next pass. Victims are preemptible jobs of projects above their
quota when taken, and no victim is one too many.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_builders import node
from test_policy_quota_properties import next_pass, victims_leave_lenders_borrowing_until_the_last

from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy import Code, PendingJob, RunningJob, Snapshot, decide

NOW = 1000.0
EPS = 1e-9
NAMES = ("p0", "p1", "p2", "p3")
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def guaranteed_waits(draw: st.DrawFn) -> tuple[Snapshot, int]:
    """A snapshot with one pending job within its project's quota, and that job's id."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    size = rnd.choice([2, 4, 8, 8, 16])
    box = node("box", size)
    # Quotas that add up to at most the node's GPUs.
    room, projects = size, {}
    for name in NAMES:
        quota = rnd.randint(0, room)
        room -= quota
        projects[name] = Project(name, quota=quota, weight=rnd.choice([0.5, 1, 2]))
    claimant = rnd.choice([n for n in NAMES if projects[n].quota > 0] or [NAMES[0]])
    if projects[claimant].quota == 0:
        projects[claimant] = replace(projects[claimant], quota=1)
        size_left = size - sum(p.quota for p in projects.values())
        if size_left < 0:  # give the GPU back from another project's quota
            donor = next(n for n in NAMES if n != claimant and projects[n].quota > 0)
            projects[donor] = replace(projects[donor], quota=projects[donor].quota - 1)
    # Running jobs of every shape, until the node is full or nearly.
    free = list(range(size))
    rnd.shuffle(free)
    use: dict[str, int] = defaultdict(int)
    running: list[RunningJob] = []
    for job_id in range(100, 100 + size):
        if not free or rnd.random() < 0.1:
            break
        gpus = min(len(free), rnd.choice([1, 1, 2, 3, 4, 8]))
        project = rnd.choice(NAMES)
        # A non-preemptible job only within its project's quota (admission's rule).
        preemptible = use[project] + gpus > projects[project].quota or rnd.random() < 0.7
        taken, free = tuple(sorted(free[:gpus])), free[gpus:]
        use[project] += gpus
        running.append(
            RunningJob(
                job_id,
                "box",
                taken,
                Resources(gpus=gpus),
                start_time=float(rnd.randint(0, 990)),
                priority=rnd.choice([100, 200, 300]),
                project=project,
                time_limit_s=rnd.choice([None, 86_400.0]),
                preemptible=preemptible,
            )
        )
    # The claim keeps its project within its quota.
    room_in_quota = int(projects[claimant].quota - use[claimant])
    if room_in_quota < 1:  # drop the claimant's jobs until it has room
        running = [r for r in running if r.project != claimant]
        room_in_quota = int(projects[claimant].quota)
    gpus = rnd.randint(1, room_in_quota)
    claim = PendingJob(
        1,
        Resources(gpus=gpus),
        priority=rnd.choice([100, 200, 300, 400]),
        submit_time=float(rnd.randint(0, 50)),
        project=claimant,
        preemptible=rnd.random() < 0.5,
    )
    return Snapshot((box,), (claim,), tuple(running), projects=projects), claim.id


@SETTINGS
@given(guaranteed_waits())
def test_a_project_within_its_quota_waits_at_most_one_grace_period(
    case: tuple[Snapshot, int],
) -> None:
    snap, claim = case
    d = decide(snap, NOW)
    started = {s.job_id for s in d.starts}
    if claim in started:
        return
    status = d.pending[claim]
    assert status.code is Code.RECLAIM, status
    running = {r.id: r for r in snap.running}
    use: dict[str, float] = defaultdict(float)
    for r in snap.running:
        use[r.project] += len(r.gpus)
    victims = [running[p.job_id] for p in d.preemptions]
    assert victims and all(p.for_job_id == claim for p in d.preemptions)
    # Each victim is a preemptible job of another project, above its quota when the victim
    # is taken: a project within its quota is never preempted by another.
    for v in victims:
        assert v.preemptible and v.project != snap.pending[0].project
    assert victims_leave_lenders_borrowing_until_the_last(snap, victims)
    # No victim too many: without any one of them the job would not fit.
    free = len(snap.nodes[0].gpus) - sum(len(r.gpus) for r in snap.running)
    need = snap.pending[0].resources.gpus
    freed = sum(len(v.gpus) for v in victims)
    assert free + freed >= need
    assert all(free + freed - len(v.gpus) < need for v in victims)
    # Once the victims are gone (within their grace period), it starts in the next pass.
    after = decide(next_pass(snap, d), NOW + 30.0)
    assert claim in {s.job_id for s in after.starts}, after.pending.get(claim)
