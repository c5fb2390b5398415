"""Real distinct Unix users of one shared pool, each running the CLI in-process as themselves
(integration/real_users.py): what the permission tests of steering and bulk cancel share."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gpupool.cli.main import main
from integration.pool_harness import Pool
from integration.real_users import (
    Outcome,
    as_user,
    ensure_user,
    preload,
    public_dir,
    require_root,
    team_pool_dir,
)

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


@contextmanager
def team_pool(prefix: str, commands: Callable[[int], list[list[str]]]) -> Iterator[Team]:
    """A shared pool run as root, OPS its admin, ALICE and BOB real users; `commands(job)`
    are the CLI lines the tests will run (about a pending job `job`), whose lazy imports are
    loaded while root can read them."""
    require_root()
    for name in (ALICE, BOB, OPS):
        ensure_user(name)
    with public_dir(prefix) as root:
        pool = Pool(team_pool_dir(root, [OPS])).start()
        os.environ["GPUPOOL_STATE_DIR"] = str(pool.state_dir)
        try:
            job = pool.submit("--begin", "now+1h", "--", "true")
            preload(*commands(job))
            pool.cancel(job)
            yield Team(pool)
        finally:
            del os.environ["GPUPOOL_STATE_DIR"]
            pool.cleanup()
