"""Who may cancel whose jobs in one bulk cancel, with real distinct Unix users against a real
daemon run as root (shared mode), through the CLI (the pattern of test_steering_permissions.py;
docs/jobs.md, "Cancel many jobs at once"; issue 30, item 5): the rule of a single cancel,
applied to each job selected; what was skipped is counted and said, with why; an admin's
cancel of other users' jobs is one audit entry.

Before the fix the CLI cancelled job by job, a request each, and `--user me` named a user
called "me"."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from integration.team_users import ALICE, BOB, OPS, Team, team_pool


@pytest.fixture(scope="module")
def team() -> Iterator[Team]:
    def commands(job: int) -> list[list[str]]:
        return [
            ["cancel", "--user", "nobody", "--state", "pending"],
            ["cancel", str(job), "99999"],
            ["audit", "--json"],
        ]

    with team_pool("gpupool-bulk-", commands) as made:
        yield made


def test_a_user_cancels_only_their_own_and_is_told_what_was_skipped(team: Team) -> None:
    alices = team.pending_of(ALICE, 3)
    bobs = team.pending_of(BOB, 2)
    refused = team.cli(BOB, "cancel", "--user", ALICE, "--state", "pending")
    assert refused.code == 2, refused
    assert "cancelled 0 jobs; skipped 3: 3 not allowed" in refused.out
    for one in alices:
        assert f"gpupool: job {one}: only the job's owner {ALICE}" in refused.err
    mixed = team.cli(BOB, "cancel", *map(str, alices[:1] + bobs))
    assert mixed.code == 2, mixed
    assert "cancelled 2 jobs (2 pending); skipped 1: 1 not allowed" in mixed.out
    states = {j: team.pool.client.job(j).state for j in alices + bobs}
    assert [states[j] for j in alices] == ["PENDING"] * 3
    assert [states[j] for j in bobs] == ["CANCELLED"] * 2
    mine = team.cli(ALICE, "cancel", "--state", "pending", "--user", "me")
    assert mine.code == 0, mine
    assert mine.out.strip().splitlines()[-1] == "cancelled 3 jobs (3 pending)"
    assert {team.pool.client.job(j).state for j in alices} == {"CANCELLED"}


def test_a_pool_admin_cancels_another_users_jobs_in_one_audited_request(team: Team) -> None:
    alices = team.pending_of(ALICE, 3)
    done = team.cli(OPS, "cancel", "--user", ALICE, "--state", "pending")
    assert done.code == 0, done
    assert done.out.strip().splitlines()[-1] == "cancelled 3 jobs (3 pending)"
    assert {team.pool.client.job(j).state for j in alices} == {"CANCELLED"}
    entries = json.loads(team.cli(OPS, "audit", "--json").out)["entries"]
    bulk = [e for e in entries if e["action"] == "job.cancel" and e["actor"] == OPS]
    assert len(bulk) == 1, bulk
    first, last = alices[0], alices[-1]
    assert bulk[0]["target"] == f"jobs {first}-{last}", bulk
    assert f"owner {ALICE}" in bulk[0]["detail"]
