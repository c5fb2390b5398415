"""Scheduling answers on the real daemon (issue 11): every view says the same thing, and
what it says is true. No fixed sleeps: each wait is on a condition, with a deadline."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from integration.pool_harness import Pool

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    """The first truthy answer of `probe`, polled until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"not after {timeout}s: {what}")
        time.sleep(0.05)


def _pending_with_factors(pool: Pool, ids: list[int]) -> list[dict[str, Any]] | None:
    jobs = {j["id"]: j for j in pool.client.jobs()}
    ready = [jobs[i] for i in ids if jobs.get(i, {}).get("priority_factors")]
    return ready if len(ready) == len(ids) else None


def test_queue_priority_json_lists_the_pending_jobs_in_queue_order_with_factors(
    pool: Pool,
) -> None:
    blocker = pool.submit("--gpus", "4", "--", "sleep", "60")
    pool.wait_state(blocker, "RUNNING")
    low = pool.submit("--gpus", "1", "--priority", "low", "--", "true")
    high = pool.submit("--gpus", "1", "--priority", "high", "--", "true")
    normal = pool.submit("--gpus", "2", "--", "true")
    eventually(lambda: _pending_with_factors(pool, [low, high, normal]), "factors of every job")
    table = pool.cli("queue", "--priority", check=True).stdout.splitlines()
    in_table = [int(line.split()[0]) for line in table[1:]]
    listed = json.loads(pool.cli("queue", "--priority", "--json", check=True).stdout)
    assert [j["id"] for j in listed] == in_table == [high, normal, low]
    assert all(j["state"] == "PENDING" for j in listed)
    for j in listed:
        factors = j["priority_factors"]
        assert factors is not None and set(factors) >= {"class", "fairshare", "age", "size"}
    assert [j["priority_factors"]["class"] for j in listed] == [300, 200, 100]
    pool.cli("cancel", "--mine", check=True)
