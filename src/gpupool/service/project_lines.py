"""How a project, and a change to it, read in one line: in the daemon's log and the audit
log (`project vision changed by alice: quota 4 -> 8`)."""

from __future__ import annotations

from collections.abc import Sequence

from gpupool.core.project import Project, fmt_gpus
from gpupool.core.units import format_duration, format_size


def _limit(value: float | None) -> str:
    return "none" if value is None else fmt_gpus(value)


def _time_limit(value: float | None) -> str:
    return "none" if value is None else format_duration(value)


def _members(members: Sequence[str]) -> str:
    return ", ".join(members) if members else "everyone"


def project_fields(p: Project) -> str:
    """'quota 4, limit 8, weight 2, department research, members alice, bob, default time
    limit 12h' (the fields that are not their defaults, and always the quota)."""
    parts = [f"quota {fmt_gpus(p.quota)}"]
    if p.limit is not None:
        parts.append(f"limit {fmt_gpus(p.limit)}")
    if p.weight != 1.0:
        parts.append(f"weight {p.weight:g}")
    if p.department is not None:
        parts.append(f"department {p.department}")
    parts.append(f"members {_members(p.members)}")
    if p.default_time_limit_s is not None:
        parts.append(f"default time limit {_time_limit(p.default_time_limit_s)}")
    if p.idle_timeout_s is not None:
        parts.append(f"idle policy {idle_policy(p)}")
    for label, value in _min_runtimes(p):
        if value is not None:
            parts.append(f"{label} {format_duration(value)}")
    for label, cap in _user_caps(p):
        if cap is not None:
            parts.append(f"{label} {cap}")
    for label, amount in _resource_limits(p):
        if amount is not None:
            parts.append(f"{label} {amount}")
    return ", ".join(parts)


def _min_runtimes(p: Project) -> tuple[tuple[str, float | None], ...]:
    """The project's minimum run times, by the words a line names them with (None: the
    pool's default)."""
    return (
        ("preempt min runtime", p.preempt_min_runtime_s),
        ("reclaim min runtime", p.reclaim_min_runtime_s),
    )


def _min_runtime(value: float | None) -> str:
    return "pool default" if value is None else format_duration(value)


def _user_caps(p: Project) -> tuple[tuple[str, str | None], ...]:
    """The project's per-user caps, by the words a line names them with, and their values
    (None: the pool's default)."""
    gpus, jobs = p.max_gpus_per_user, p.max_running_jobs_per_user
    return (
        ("max GPUs per user", None if gpus is None else fmt_gpus(gpus)),
        ("max running jobs per user", None if jobs is None else str(jobs)),
    )


def _resource_limits(p: Project) -> tuple[tuple[str, str | None], ...]:
    """The project's CPU and memory limits, by the words a line names them with, and their
    values ('32', '256GiB'; None: no limit)."""
    cpus, memory = p.cpu_limit, p.memory_limit_bytes
    return (
        ("CPU limit", None if cpus is None else str(cpus)),
        ("memory limit", None if memory is None else format_size(memory)),
    )


def idle_policy(p: Project) -> str:
    """'stop after 30m below 5%'; 'off' without an idle timeout."""
    if p.idle_timeout_s is None:
        return "off"
    action = p.idle_action.value if p.idle_action is not None else "stop interactive, notify others"
    return f"{action} after {_time_limit(p.idle_timeout_s)} below {p.idle_threshold_pct:g}%"


def project_changes(old: Project, new: Project) -> str:
    """'quota 4 -> 8, members alice -> alice, bob'; 'nothing' when nothing changed."""
    pairs = [
        ("quota", fmt_gpus(old.quota), fmt_gpus(new.quota)),
        ("limit", _limit(old.limit), _limit(new.limit)),
        ("weight", f"{old.weight:g}", f"{new.weight:g}"),
        ("department", old.department or "none", new.department or "none"),
        ("members", _members(old.members), _members(new.members)),
        (
            "default time limit",
            _time_limit(old.default_time_limit_s),
            _time_limit(new.default_time_limit_s),
        ),
        ("idle policy", idle_policy(old), idle_policy(new)),
        *(
            (label, _min_runtime(a), _min_runtime(b))
            for (label, a), (_, b) in zip(_min_runtimes(old), _min_runtimes(new), strict=True)
        ),
        *(
            (label, a or "pool default", b or "pool default")
            for (label, a), (_, b) in zip(_user_caps(old), _user_caps(new), strict=True)
        ),
        *(
            (label, a or "none", b or "none")
            for (label, a), (_, b) in zip(_resource_limits(old), _resource_limits(new), strict=True)
        ),
    ]
    changed = [f"{name} {a} -> {b}" for name, a, b in pairs if a != b]
    return ", ".join(changed) or "nothing"
