"""Who may steer whose jobs, with real distinct Unix users against a real daemon run as
root (shared mode), through the CLI (the pattern of test_permissions.py): another user may
not hold, release, update or signal a job; an admin's hold is JobHeldAdmin and its owner
cannot release it; a running job's owner may shorten its time limit, only an admin lengthen
it; what admins do to others' jobs is in the audit log.

Before this change the verbs did not exist: every test here failed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from integration.team_users import ALICE, BOB, OPS, Team, team_pool


@pytest.fixture(scope="module")
def team() -> Iterator[Team]:
    def commands(job: int) -> list[list[str]]:
        return [
            ["hold", str(job)],
            ["release", str(job)],
            ["update", str(job), "--time", "2h"],
            ["cancel", "--signal", "USR1", str(job)],
            ["cancel", "--user", "nobody", "--state", "pending"],
            ["audit"],
            ["audit", "--json"],
        ]

    with team_pool("gpupool-steer-", commands) as made:
        yield made


def test_another_user_may_not_steer_a_job(team: Team) -> None:
    job = team.submit_as(ALICE, "--begin", "now+1h", "--", "true")
    for argv, verb in (
        (["hold", str(job)], "hold"),
        (["release", str(job)], "release"),
        (["update", str(job), "--priority", "high"], "change"),
        (["cancel", "--signal", "USR1", str(job)], "signal"),
    ):
        done = team.cli(BOB, *argv)
        assert done.code == 2, done
        assert (
            f"only the job's owner {ALICE}, an admin of project default or a pool admin "
            f"({OPS} or root) may {verb} job {job}"
        ) in done.err
    # Selected with --user: each of alice's jobs is refused, with the reason.
    other = team.submit_as(ALICE, "--begin", "now+1h", "--", "true")
    by_user = team.cli(BOB, "cancel", "--user", ALICE, "--state", "pending")
    assert by_user.code == 2, by_user
    for one in (job, other):  # each job refused on its own line, with the reason
        assert f"gpupool: job {one}: only the job's owner {ALICE}" in by_user.err
    team.pool.cancel(other)
    assert team.pool.client.job(job).state == "PENDING"
    team.pool.cancel(job)


def test_an_admins_hold_is_released_by_an_admin_only_and_audited(team: Team) -> None:
    job = team.submit_as(ALICE, "--begin", "now+1h", "--", "true")
    held = team.cli(OPS, "hold", str(job))
    assert held.code == 0, held
    assert team.pool.wait_reason(job, "JobHeldAdmin").hold == "admin"
    again = team.cli(ALICE, "hold", str(job))  # the owner's hold never weakens an admin's
    assert again.code == 0 and "already held" in again.out, again
    mine = team.cli(ALICE, "release", str(job))
    assert mine.code == 2, mine
    assert "was held by an admin: only an admin of project default or a pool admin" in mine.err
    assert team.cli(OPS, "release", str(job)).code == 0
    assert team.pool.wait_reason(job, "BeginTime").hold is None
    audit = team.cli(OPS, "audit")
    assert "job.hold" in audit.out and "job.release" in audit.out, audit


def test_only_an_admin_lengthens_a_running_jobs_time_limit(team: Team) -> None:
    job = team.submit_as(ALICE, "--time", "1h", "--", "sleep", "600")
    team.pool.wait_state(job, "RUNNING")
    longer = team.cli(ALICE, "update", str(job), "--time", "2h")
    assert longer.code == 2, longer
    assert "its owner may only shorten its time limit (1h00m now)" in longer.err
    assert team.cli(ALICE, "update", str(job), "--time", "30m").code == 0
    assert team.pool.client.job(job).time_limit_s == 1800
    assert team.cli(OPS, "update", str(job), "--time", "3h").code == 0
    assert team.pool.client.job(job).time_limit_s == 3 * 3600
    updates = [
        e
        for e in json.loads(team.cli(OPS, "audit", "--json").out)["entries"]
        if e["action"] == "job.update"
    ]
    # The owner's shortening is hers to make: only the admin's change is audited.
    assert [(e["actor"], e["target"]) for e in updates] == [(OPS, f"job {job}")], updates
    assert "time limit 30m00s -> 3h00m" in updates[0]["detail"]
    team.pool.cancel(job)
    team.pool.wait(job)
