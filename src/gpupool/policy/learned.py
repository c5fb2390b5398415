"""What one scheduling pass has learned about one distinct request (`Learned`).

The pass (policy/scheduling_pass.py) keeps one per request key and answers every later job
asking the same from it; its handling of jobs wider than any node (policy/wide_jobs.py) reads
and writes the same. Both import this module, which imports neither
(tests/unit/test_policy_acyclic.py).
"""

from __future__ import annotations

from gpupool.policy.status import Status


class Learned:
    """What the pass has learned about one distinct request. It stays true for the rest of
    the pass, because what is free only shrinks during it."""

    __slots__ = ("behind", "behind_at", "impossible", "no_fit", "no_spare", "wide")

    def __init__(self, impossible: Status | None, wide: bool) -> None:
        self.impossible = impossible  # Unsatisfiable, or None
        self.wide = wide  # spread over nodes (policy/wide.py)
        self.no_fit: Status | None = None  # fits nowhere now (and the reservation is made)
        self.no_spare = False  # does not fit what a job outlasting the reservation may use
        # For a job outlasting the reservation: its Priority status, valid while no other job
        # starts (SchedulingPass.version), since it relies on the request fitting the
        # reserved node now.
        self.behind: Status | None = None
        self.behind_at = -1
