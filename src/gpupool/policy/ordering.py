"""The order in which pending jobs are considered: priority, then submit order."""

from __future__ import annotations

from collections.abc import Iterable

from gpupool.policy.snapshot import PendingJob


def queue_order(pending: Iterable[PendingJob]) -> list[PendingJob]:
    """Highest priority first; among equals, earliest submission, then lowest id."""
    return sorted(pending, key=lambda j: (-j.priority, j.submit_time, j.id))
