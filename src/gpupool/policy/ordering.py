"""The order in which pending jobs are considered.

`rank` is the one entry point: decide() and `gpupool queue --priority` both use it.
"""

from __future__ import annotations

from gpupool.policy.snapshot import PendingJob, PriorityFactors, Snapshot


def rank(snapshot: Snapshot, now: float) -> tuple[list[PendingJob], dict[int, PriorityFactors]]:
    """Pending jobs best first, and the factors behind each one's place.

    Priority class first (higher first); inside a class, earliest submission, then lowest id.
    """
    ordered = sorted(snapshot.pending, key=lambda j: (-j.priority, j.submit_time, j.id))
    factors = {
        j.id: PriorityFactors(j.id, j.priority, fairshare=0.0, age=0.0, size=0.0, score=0.0)
        for j in ordered
    }
    return ordered, factors
