"""Telling a pending job's owner that its project's quota or limit can no longer let it
start (reason `QuotaNeverFits`, policy/quota_feasibility.py), and again when it can.

Such a job stays PENDING, as Slurm keeps a job a limit blocks pending with the limit as its
reason (docs/scheduling.md): `queue` shows the reason, `why` what to change. When a pass
first gives a job that reason (a quota lowered or a limit set by `gpupool project set`, a
project deleted or created, `gpupool.toml` changed before a restart), a line goes into its
story and the daemon's log; another when a later pass no longer gives it. The stored reason
is what the job was last told: a line is added only when the pass changes it, and before the
new reason is stored, so a crash in between repeats a line rather than losing it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from gpupool.core.job import Job, JobState
from gpupool.policy import Code, Decision

log = logging.getLogger("gpupool.engine")
_NEVER = Code.QUOTA_NEVER_FITS


def note_quota_changes(store: Any, jobs: Iterable[Job], decision: Decision, now: float) -> None:
    """For each pending job of `jobs` (as the pass's snapshot read them, stored reasons
    included) whose `QuotaNeverFits` this pass gives or takes away: a line in its story."""
    for job in jobs:
        status = decision.pending.get(job.id)
        if job.state is not JobState.PENDING or status is None:
            continue
        never, was = status.code is _NEVER, job.reason == _NEVER.value
        if never and not was:
            cause = f"can never start while quotas stay as they are: {status.message}"
        elif was and not never:
            cause = "its project's quota or limit lets it start again"
        else:
            continue
        store.note(job.id, now, cause, only_if=JobState.PENDING)
        log.info("job %s %s", job.id, cause)
