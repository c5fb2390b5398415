"""The words of the preemptions by priority class and where it pays (policy/class_preemption.py),
for a waiting job's status (`gpupool why`) and a victim's history; render.py calls these."""

from __future__ import annotations

from gpupool.core.job import priority_name
from gpupool.core.units import format_duration
from gpupool.policy.reasons import ClassCause, PaysCause
from gpupool.policy.status import Rule


def _jobs(ids: tuple[int, ...]) -> str:
    return ("job " if len(ids) == 1 else "jobs ") + ", ".join(map(str, ids))


def status_text(rule: Rule, jobs: tuple[int, ...]) -> str:
    """A waiting job whose victims are being stopped: which, and when it starts."""
    which = _jobs(jobs)
    if rule is Rule.CLASS_PREEMPTION:
        why = "preempted for this job, of a higher priority class"
    else:
        why = "they checkpoint and would hold their GPUs far longer than this job needs them"
    return (
        f"waiting for {which} to stop ({why}); it starts once they have stopped, "
        "within their grace period"
    )


def cause_text(for_job: int, c: ClassCause | PaysCause) -> str:
    """Why a running job is preempted, for its history."""
    if isinstance(c, ClassCause):
        return (
            f"preempted for job {for_job} of priority class {priority_name(c.klass)} "
            f"(this job: {priority_name(c.victim_klass)}); its restart redoes "
            f"{c.lost_gpu_s / 3600.0:.1f} GPU-hours of work"
        )
    return (
        f"preempted for job {for_job}, which needs its GPUs for at most "
        f"{format_duration(c.need_s)} while this job would hold them "
        f"{format_duration(c.victim_left_s)} more; it checkpoints, so it loses little"
    )
