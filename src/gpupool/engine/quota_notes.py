"""Telling a pending job's owner that its project's quota or limit can no longer let it
start (reason `QuotaNeverFits`, policy/quota_feasibility.py), and again when it can.

Such a job stays PENDING, as Slurm keeps a job a limit blocks pending with the limit as its
reason (docs/scheduling.md): `queue` shows the reason, `why` what to change. When a pass
first gives a job that reason (a quota lowered or a limit set by `gpupool project set`, a
project deleted or created, `gpupool.toml` changed before a restart), a line goes into its
history and the daemon's log; another when a later pass no longer gives it. The stored reason
is what the job was last told: a line is added only when the pass changes it, and before the
new reason is stored (engine/react.py orders the two), so a crash in between repeats a line
rather than losing it.
"""

from __future__ import annotations

from gpupool.policy import Code, Status
from gpupool.policy.render import status_text

_NEVER = Code.QUOTA_NEVER_FITS


def quota_note(status: Status, stored_reason: str) -> str | None:
    """The line for the history of a pending job that the pass gave `status`, whose stored
    reason is `stored_reason`; None when its QuotaNeverFits did not come or go."""
    never, was = status.code is _NEVER, stored_reason == _NEVER.value
    if never and not was:
        return f"can never start while quotas stay as they are: {status_text(status)}"
    if was and not never:
        return "its project's quota or limit lets it start again"
    return None
