"""Reclaim in `decide` (policy/reclaim.py): which borrowers are preempted, and for whom.

Table-driven, with the cases and builders of test_policy_quota.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from policy_builders import node
from test_policy_quota import BOX, LOW, Case, check, full, job, projects, run, wait

from gpupool.core.project import Project
from gpupool.policy import Code, RunningJob

NLP2_VISION0 = projects(Project("nlp", quota=2), Project("vision", quota=0))


def ends_at(r: RunningJob, end: float) -> RunningJob:
    return replace(r, time_limit_s=end - r.start_time)


CASES = [
    Case(
        # Found by test_a_reclaim_starts_its_job_after_one_grace_period (seed 4, 30,000
        # examples): in order (youngest first) 11 and 12 leave vision room for no more, and
        # dropping 11 (the first that used the room) is not enough; dropping 12 is.
        "a plan the first try misses: the victims that fit skip one that used the room above quota",
        projects(Project("nlp", quota=4), Project("vision", quota=1)),
        (node("big", 5),),
        running=(
            run(11, "big", [0, 1], "vision", start=9.0),
            run(12, "big", [2], "vision", start=5.0),
            run(13, "big", [3, 4], "vision", start=1.0),
        ),
        pending=(job(1, 4, "nlp"),),
        waits={1: wait(Code.RECLAIM, "waiting for jobs 11, 13 to stop")},
        preempted={11: 1, 13: 1},  # vision keeps 1, its quota
    ),
    Case(
        "a borrower within reclaim patience of its time limit is spared (decide runs at 1000)",
        NLP2_VISION0,
        BOX,
        running=(
            run(11, "box", [0], "vision", start=1.0),
            ends_at(run(12, "box", [1], "vision", prio=LOW), 1000.0 + 300.0),
            run(13, "box", [2], "vision", start=3.0),
            run(14, "box", [3], "vision", start=4.0),
        ),
        pending=(job(1, 1, "nlp"),),
        waits={1: wait(Code.RECLAIM, "job 14")},
        preempted={14: 1},  # not 12, the lowest priority: it ends within the patience (1 h) anyway
    ),
    Case(
        "when every borrower ends within patience, the claim waits for them",
        NLP2_VISION0,
        BOX,
        running=tuple(ends_at(r, 1000.0 + 60.0) for r in full("box", "vision", 10, 4)),
        pending=(job(1, 1, "nlp"),),
        waits={1: wait(Code.RESOURCES, "reserved")},
        reserved=1,  # it holds the reservation for when they end
    ),
    Case(
        "reclaim takes the lowest priority borrower",
        NLP2_VISION0,
        BOX,
        running=(
            run(11, "box", [0], "vision", start=1.0),
            run(12, "box", [1], "vision", prio=LOW),
            run(13, "box", [2], "vision", start=3.0),
            run(14, "box", [3], "vision", start=4.0),
        ),
        pending=(job(1, 1, "nlp"),),
        waits={
            1: wait(
                Code.RECLAIM, "waiting for job 12 to stop (preempted to give project nlp its quota)"
            )
        },
        preempted={12: 1},
        reasons=(
            "reclaimed for project nlp (quota 2, in use 0): job 12 borrowed above project "
            "vision's quota (0, in use 4)",
        ),
    ),
    Case(
        "then the project most above its fair share",
        projects(Project("nlp", quota=1), Project("vision", quota=1), Project("speech")),
        BOX,
        # vision: (3 - 1) / 1 = 2 above its share; speech: (1 - 0) / 1 = 1.
        running=(*full("box", "vision", 10, 3), run(20, "box", [3], "speech", start=99.0)),
        pending=(job(1, 1, "nlp"),),
        waits={1: wait(Code.RECLAIM, "job 12")},
        preempted={12: 1},  # vision's youngest
    ),
    Case(
        "weight counts in the fair share: a heavy project is less above it",
        projects(Project("nlp", quota=1), Project("vision", quota=1, weight=4), Project("speech")),
        BOX,
        # vision: (3 - 1) / 4 = 0.5 above its share; speech: 1.
        running=(*full("box", "vision", 10, 3), run(20, "box", [3], "speech")),
        pending=(job(1, 1, "nlp"),),
        waits={1: wait(Code.RECLAIM, "job 20")},
        preempted={20: 1},
    ),
    Case(
        "then the youngest job",
        NLP2_VISION0,
        BOX,
        running=(
            run(11, "box", [0], "vision", start=50.0),
            run(12, "box", [1], "vision", start=10.0),
            run(13, "box", [2], "vision", start=30.0),
            run(14, "box", [3], "vision", start=20.0),
        ),
        pending=(job(1, 1, "nlp"),),
        preempted={11: 1},
        waits={1: wait(Code.RECLAIM)},
    ),
    Case(
        "jobs of a project within its quota are never reclaimed",
        projects(Project("nlp", quota=2), Project("vision", quota=4)),
        BOX,
        running=tuple(full("box", "vision", 10, 4)),
        pending=(job(1, 1, "nlp"),),
        waits={1: wait(Code.RESOURCES)},
        reserved=1,
    ),
    Case(
        # Issue 30, item 1: the rule was "no victim that would put its project under its
        # quota", which skipped every job only partly borrowed, and teama waited a day.
        "a job half over its project's quota is preempted whole (Kueue, KAI, Run:ai)",
        projects(Project("teama", quota=4), Project("teamb", quota=4)),
        (node("box", 8),),
        running=(run(11, "box", list(range(8)), "teamb"),),  # 4 within quota, 4 borrowed
        pending=(job(1, 4, "teama"),),
        waits={1: wait(Code.RECLAIM, "waiting for job 11 to stop")},
        preempted={11: 1},
        reasons=(
            "reclaimed for project teama (quota 4, in use 0): job 11 borrowed above project "
            "teamb's quota (4, in use 8)",
        ),
    ),
    Case(
        "whole borrowers still lose the least work: two young one-GPU jobs, not the old gang",
        projects(Project("teama", quota=2), Project("teamb", quota=2), Project("teamc")),
        (node("box", 8),),
        running=(
            run(11, "box", [0, 1, 2, 3, 4, 5], "teamb", start=0.0),  # 2 within quota, 4 borrowed
            run(21, "box", [6], "teamc", start=990.0),
            run(22, "box", [7], "teamc", start=995.0),
        ),
        pending=(job(1, 2, "teama"),),
        waits={1: wait(Code.RECLAIM, "waiting for jobs 21, 22 to stop")},
        preempted={21: 1, 22: 1},
    ),
    Case(
        "a victim is taken only while its project is above its quota",
        projects(Project("nlp", quota=2), Project("vision", quota=3)),
        BOX,
        running=tuple(full("box", "vision", 10, 4)),  # one GPU above quota: not two
        pending=(job(1, 2, "nlp"),),
        waits={1: wait(Code.RESOURCES)},
        reserved=1,
    ),
    Case(
        "non-preemptible borrowers are never reclaimed",
        NLP2_VISION0,
        BOX,
        running=tuple(full("box", "vision", 10, 4, preemptible=False)),
        pending=(job(1, 1, "nlp"),),
        waits={1: wait(Code.RESOURCES)},
        reserved=1,
    ),
    Case(
        "no reclaim for a job that would take its own project above quota",
        NLP2_VISION0,
        BOX,
        running=(run(30, "box", [0], "nlp"), *full("box", "vision", 11, 3)[:3]),
        pending=(job(1, 2, "nlp"),),
        waits={1: wait(Code.RESOURCES)},
        reserved=1,
    ),
    Case(
        "no more victims than needed, and the free GPUs a reclaim counts on are held for it",
        projects(Project("nlp", quota=4), Project("vision")),
        (node("box", 8),),
        running=tuple(full("box", "vision", 10, 6)),  # GPUs 6 and 7 free
        pending=(job(1, 4, "nlp"), job(2, 1, "vision"), job(3, 8, "speech", prio=LOW)),
        waits={
            1: wait(Code.RECLAIM, "waiting for jobs 14, 15 to stop"),
            2: wait(Code.RESOURCES),
            3: wait(Code.RESOURCES),
        },
        preempted={14: 1, 15: 1},
        reserved=2,
    ),
    Case(
        "victims on one node: four one-GPU borrowers where the gang fits",
        projects(Project("nlp", quota=4), Project("vision"), Project("speech", quota=2)),
        (node("a", 4), node("b", 4)),
        running=(
            *full("a", "vision", 10, 4),
            run(20, "b", [0, 1], "vision"),
            run(21, "b", [2, 3], "speech"),  # within speech's quota
        ),
        pending=(job(1, 4, "nlp"),),
        waits={1: wait(Code.RECLAIM, "jobs 10, 11, 12, 13")},
        preempted={10: 1, 11: 1, 12: 1, 13: 1},
    ),
    Case(
        "at equal work lost, the node where fewest victims do: one two-GPU borrower, not two",
        projects(Project("nlp", quota=4), Project("vision"), Project("speech", quota=2)),
        (node("a", 4), node("b", 4)),
        running=(
            *full("a", "vision", 10, 4),  # jobs 12 and 13 ran 988 + 987 s
            run(20, "b", [0, 1], "vision", start=1000.0 - 987.5),  # 2 x 987.5 s
            run(21, "b", [2, 3], "speech"),
        ),
        pending=(job(1, 2, "nlp"),),
        waits={1: wait(Code.RECLAIM, "job 20")},
        preempted={20: 1},
    ),
    Case(
        "the plan that throws away the least work wins over fewer victims",
        projects(Project("nlp", quota=4), Project("vision"), Project("speech", quota=2)),
        (node("a", 4), node("b", 4)),
        running=(
            *full("a", "vision", 10, 4),  # jobs 12 and 13: 988 + 987 GPU-seconds
            run(20, "b", [0, 1], "vision", start=0.0),  # 2 x 1000 GPU-seconds
            run(21, "b", [2, 3], "speech"),
        ),
        pending=(job(1, 2, "nlp"),),
        waits={1: wait(Code.RECLAIM, "jobs 12, 13")},
        preempted={12: 1, 13: 1},
    ),
    Case(
        "two claims in one pass take different victims",
        projects(Project("a", quota=2), Project("b", quota=2), Project("c", weight=0.5)),
        BOX,
        # c is (1 - 0) / 0.5 = 2 above its share, a (3 - 2) / 1 = 1: c's job goes first.
        running=(*full("box", "a", 10, 3), run(20, "box", [3], "c")),
        pending=(job(1, 1, "b"), job(2, 1, "b")),
        waits={1: wait(Code.RECLAIM, "job 20"), 2: wait(Code.RECLAIM, "job 12")},
        preempted={20: 1, 12: 2},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_reclaim_case(case: Case) -> None:
    check(case)


def test_reclaim_after_lets_a_claim_wait_for_free_gpus_first() -> None:
    """`reclaim_after_s`: a claim that has waited less than that takes the reservation and
    preempts nobody; once it has waited that long, it reclaims as usual."""
    from gpupool.policy import Snapshot, decide
    from gpupool.policy.snapshot import PolicyConfig

    borrowers = tuple(run(10 + g, "box", [g], "vision", start=float(g)) for g in range(4))
    claim = replace(job(1, 1, "nlp"), submit_time=900.0)
    config = PolicyConfig(reclaim_after_s=600.0)
    snap = Snapshot(BOX, (claim,), borrowers, config=config, projects=NLP2_VISION0)
    early = decide(snap, 1000.0)  # waited 100 s
    assert early.preemptions == ()
    assert early.pending[1].code is Code.RESOURCES
    assert [r.job_id for r in early.reservations] == [1]
    late = decide(snap, 1500.0)  # waited 600 s
    assert [p.for_job_id for p in late.preemptions] == [1]
    assert late.pending[1].code is Code.RECLAIM
