"""The scheduling pass (policy/scheduling_pass.py) takes a queue without quotas in line
(`_run_plain`, the hot path); it must decide exactly as taking each job with `take`, with
backfill and without (the strict profiles), over random pools and queues."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from test_policy_properties import NOW, SETTINGS, snapshots
from test_policy_quota_properties import snapshots as quota_snapshots

from gpupool.policy import Snapshot, decide
from gpupool.policy.quota import QuotaBook
from gpupool.policy.scheduling_pass import SchedulingPass
from gpupool.policy.snapshot import PolicyConfig


def _one_by_one(self: SchedulingPass, ordered: object) -> None:
    for job in ordered:  # type: ignore[attr-defined]
        self.take(job)


@pytest.mark.parametrize("backfill", [True, False], ids=["backfill", "strict"])
@SETTINGS
@given(snapshots())
def test_the_plain_queue_in_line_decides_as_job_by_job(backfill: bool, snap: Snapshot) -> None:
    snap = replace(snap, config=PolicyConfig(backfill=backfill))
    in_line = decide(snap, NOW)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SchedulingPass, "_run_plain", _one_by_one)
        by_job = decide(snap, NOW)
    assert in_line == by_job


def _always_take(self: SchedulingPass, job: object) -> None:
    return None


@SETTINGS
@given(quota_snapshots())
def test_borrowers_answered_in_line_decide_as_taken(snap: Snapshot) -> None:
    # With quotas: a borrower whose request the pass already answered is not taken again
    # (`SchedulingPass._answered`); without that shortcut every borrower goes through `take`.
    in_line = decide(snap, NOW)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SchedulingPass, "_answered", _always_take)
        by_take = decide(snap, NOW)
    assert in_line == by_take


@SETTINGS
@given(quota_snapshots())
def test_the_verdict_in_line_decides_as_the_quota_book(snap: Snapshot) -> None:
    # SchedulingPass.run answers most borrowers from the book's borrow floors in line; with
    # no floors every job's verdict comes from `QuotaBook.admit`.
    in_line = decide(snap, NOW)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(QuotaBook, "borrow_floors", lambda self: None)
        by_admit = decide(snap, NOW)
    assert in_line == by_admit
