"""Why a job is (not) placed: a named code, words for humans, and which check said it.

As in Kubernetes' scheduler framework, a status is not a bool: `Resources` (waiting may help)
differs from `Unsatisfiable` (it never will: refuse at submit).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Code(str, Enum):
    # Short codes shown in the REASON column, Slurm-like.
    RESOURCES = "Resources"  # not enough free resources now; they exist in the pool
    PRIORITY = "Priority"  # a job ahead in the queue waits for resources first
    BEGIN_TIME = "BeginTime"  # held until its --begin time
    QUOTA = "Quota"  # its project's quota (borrowing needs --preemptible) or limit holds it
    RECLAIM = "Reclaim"  # within its quota: borrowed GPUs are being reclaimed for it
    UNSATISFIABLE = "Unsatisfiable"  # no node could ever run it
    # its project's quota or limit can never let it start (as they are now): quota_feasibility
    QUOTA_NEVER_FITS = "QuotaNeverFits"


@dataclass(frozen=True)
class Status:
    code: Code
    message: str
    source: str = ""  # the check that said it, e.g. "gpu_count", "ordering"

    @property
    def unresolvable(self) -> bool:
        """It never will start as things are: refused at submit (a quota change may still
        let a `QuotaNeverFits` job already queued start; it waits for that)."""
        return self.code is Code.UNSATISFIABLE or self.code is Code.QUOTA_NEVER_FITS
