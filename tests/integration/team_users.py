"""Real distinct Unix users of one shared pool, each running the CLI in-process as themselves
(integration/real_users.py): what the permission tests of steering and bulk cancel share."""

from __future__ import annotations

from gpupool.cli.main import main
from integration.pool_harness import Pool
from integration.real_users import Outcome, as_user

ALICE, BOB, OPS = "gpupool-alice", "gpupool-bob", "gpupool-ops"  # OPS: the pool's admin


class Team:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def cli(self, user: str, *argv: str) -> Outcome:
        return as_user(
            user, lambda: main(list(argv)), {"GPUPOOL_STATE_DIR": str(self.pool.state_dir)}
        )

    def submit_as(self, user: str, *argv: str) -> int:
        done = self.cli(user, "submit", "--parsable", *argv)
        assert done.code == 0, done
        return int(done.out.strip())

    def pending_of(self, user: str, count: int) -> list[int]:
        """`count` jobs of `user`'s, pending for an hour."""
        return [self.submit_as(user, "--begin", "now+1h", "--", "true") for _ in range(count)]
