"""Per-user caps inside a project on the real daemon (issue 36), with real distinct Unix users
through the CLI: a pool admin sets `--max-gpus-per-user 2 --max-jobs-per-user 3` on a project;
a user at the cap waits with reason `Quota` and `why` names them and the cap, while a
teammate's job of the same project starts; a job asking more than the cap by itself is
refused at submit; once one of the user's jobs ends, the waiting one starts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from integration.team_users import ALICE, BOB, OPS, Team, team_pool

SLEEP = ("--", "sleep", "600")


@pytest.fixture(scope="module")
def team() -> Iterator[Team]:
    def commands(job: int) -> list[list[str]]:
        return [
            ["project", "create", "warmup", "--max-gpus-per-user", "2", "--max-jobs-per-user", "3"],
            ["why", str(job)],
            ["submit", "--parsable", "--project", "warmup", "--gpus", "9", *SLEEP],
        ]

    with team_pool("gpupool-caps-", commands) as made:
        yield made


def test_a_user_at_the_cap_waits_named_while_a_teammate_starts(team: Team) -> None:
    pool = team.pool
    made = team.cli(
        OPS, "project", "create", "vision", "--max-gpus-per-user", "2", "--max-jobs-per-user", "3"
    )
    assert made.code == 0, made
    shown = team.cli(OPS, "project", "show", "vision")
    assert shown.code == 0 and "2" in shown.out, shown
    mine = [team.submit_as(ALICE, "--project", "vision", "--gpus", "1", *SLEEP) for _ in range(2)]
    for job in mine:
        pool.wait_state(job, "RUNNING")
    third = team.submit_as(ALICE, "--project", "vision", "--gpus", "1", *SLEEP)
    held = pool.wait_reason(third, "Quota")
    assert held.state == "PENDING"
    why = team.cli(ALICE, "why", str(third))
    assert f"user {ALICE} already holds 2 GPUs in project vision" in why.out, why
    teammate = team.submit_as(BOB, "--project", "vision", "--gpus", "1", *SLEEP)
    pool.wait_state(teammate, "RUNNING")  # a GPU is free and Bob is under the cap
    assert pool.client.job(third).state == "PENDING"

    refused = team.cli(ALICE, "submit", "--project", "vision", "--gpus", "3", *SLEEP)
    assert refused.code == 2, refused
    assert "lets one user hold at most 2 GPUs; this job asks for 3" in refused.err

    pool.cancel(mine[0])
    pool.wait_state(mine[0], "CANCELLED")
    pool.wait_state(third, "RUNNING")
    pool.cancel(mine[1], third, teammate)
