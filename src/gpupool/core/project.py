"""Projects (teams) and departments, as Run:ai models them: who may submit where, and the GPU
quota, limit and weight each project has. Configuration only; how the scheduler uses the
numbers is the policy's business.

A Project checks itself when it is built: an invalid one cannot exist. InvalidProject names
every bad field, so the config file, the API and the CLI can each report it in their terms.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypedDict, TypeGuard

from gpupool.core.units import parse_duration

DEFAULT_PROJECT = "default"  # always exists; open to everyone; where jobs land by default
MAX_GPUS_QUOTA = 1_000_000.0
MAX_TIME_LIMIT_S = 366 * 86400.0

NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # projects and departments (as spec.project)
USER_RE = re.compile(r"[A-Za-z0-9_.@$-][A-Za-z0-9_.@$-]{0,63}")  # POSIX-ish user names


DEFAULT_IDLE_THRESHOLD_PCT = 5.0
# The per-project minimum run times before a preemption (by a higher priority class) and a
# reclaim (by another project's quota); None in either: the pool's default for it.
MIN_RUNTIME_FIELDS = ("preempt_min_runtime_s", "reclaim_min_runtime_s")
_ZERO_DURATION_RE = re.compile(r"0+(\.0*)?\s*(ms|[smhd])?", re.IGNORECASE)


class IdleAction(StrEnum):
    """What a project's idle-GPU policy does to a job idle for its `idle_timeout_s`."""

    NOTIFY = "notify"  # a note in the job's history and a line in its log
    STOP = "stop"  # cancelled (SIGTERM, grace, SIGKILL)
    REQUEUE = "requeue"  # preempted and requeued: preemptible jobs, while others wait


class InvalidProject(ValueError):
    """Every problem with one project or department: (field, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__(problems)
        self.problems = list(problems)

    def __str__(self) -> str:
        return "; ".join(f"{f}: {m}" for f, m in self.problems)


def fmt_gpus(value: float | None) -> str:
    """4.0 -> '4', 0.5 -> '0.5', None -> '-'."""
    return "-" if value is None else f"{value:g}"


def _got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: object) -> TypeGuard[int | float]:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _check_name(value: Any, what: str) -> str | None:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        return f"{what} must be 1-64 letters, digits, '_', '.' or '-', got {_got(value)}"
    return None


def _check_amount(value: Any, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not _is_number(value):
        return f"must be a number of GPUs, got {_got(value)}"
    if not 0 <= value <= MAX_GPUS_QUOTA:
        return f"must be between 0 and {MAX_GPUS_QUOTA:g}, got {_got(value)}"
    return None


@dataclass(frozen=True)
class Department:
    """A group of projects. Its quota is informational for now."""

    name: str
    quota: float | None = None

    def __post_init__(self) -> None:
        problems = []
        if (bad := _check_name(self.name, "a department name")) is not None:
            problems.append(("name", bad))
        if (bad := _check_amount(self.quota, optional=True)) is not None:
            problems.append(("quota", bad))
        if problems:
            raise InvalidProject(problems)
        if self.quota is not None:
            object.__setattr__(self, "quota", float(self.quota))


@dataclass(frozen=True)
class Project:
    """A team's share of the pool.

    quota: GPUs guaranteed; limit: the most GPUs its jobs may hold at once (None: no cap);
    weight: its share of the idle GPUs above quotas; members: who may submit to it (empty:
    everyone); default_time_limit_s: assumed run time of its jobs without --time.
    idle_timeout_s: a job whose GPUs stay below idle_threshold_pct utilization this long
    is idle (None: no idle policy); idle_action: what then (None: stop for interactive
    jobs, notify for the others); see monitor/idle.py.
    preempt_min_runtime_s: a running job of the project is not preempted by a job of a
    higher priority class before it ran this long in its current attempt (None: the pool's
    PolicyConfig.min_runtime_s); reclaim_min_runtime_s: nor reclaimed by another project
    taking back its quota before it ran this long (None: 0, at once). As KAI-Scheduler's
    min-runtime; the policy reads them (policy/), this module only holds and checks them.
    max_gpus_per_user: the most GPUs one user's running jobs of the project may hold at once
    (a shared GPU counts its fraction); max_running_jobs_per_user: the most running jobs one
    user may have in it (None: the pool's default, PolicyConfig, else no cap). As Slurm's
    MaxTRESPerUser and MaxJobsPerUser; the quota book enforces them (policy/user_caps.py).
    cpu_limit, memory_limit_bytes: the most CPUs and bytes of memory its running jobs may
    hold at once (their --cpus and --mem; None: no cap), as `limit` caps GPUs and Slurm's
    GrpTRES caps cpu and mem.
    """

    name: str
    quota: float = 0.0
    limit: float | None = None
    weight: float = 1.0
    department: str | None = None
    members: tuple[str, ...] = field(default=())
    default_time_limit_s: float | None = None
    idle_timeout_s: float | None = None
    idle_threshold_pct: float = DEFAULT_IDLE_THRESHOLD_PCT
    idle_action: IdleAction | None = None
    preempt_min_runtime_s: float | None = None
    reclaim_min_runtime_s: float | None = None
    max_gpus_per_user: float | None = None
    max_running_jobs_per_user: int | None = None
    cpu_limit: int | None = None
    memory_limit_bytes: int | None = None

    def __post_init__(self) -> None:
        problems = project_problems(self)
        if problems:
            raise InvalidProject(problems)
        # Normal forms, so equal projects compare equal whatever they were built from.
        set_ = object.__setattr__
        set_(self, "quota", float(self.quota))
        set_(self, "limit", None if self.limit is None else float(self.limit))
        set_(self, "weight", float(self.weight))
        set_(self, "members", tuple(sorted(set(self.members))))
        if self.default_time_limit_s is not None:
            set_(self, "default_time_limit_s", float(self.default_time_limit_s))
        if self.idle_timeout_s is not None:
            set_(self, "idle_timeout_s", float(self.idle_timeout_s))
        set_(self, "idle_threshold_pct", float(self.idle_threshold_pct))
        if self.idle_action is not None:
            set_(self, "idle_action", IdleAction(self.idle_action))
        for name in MIN_RUNTIME_FIELDS:
            if (value := getattr(self, name)) is not None:
                set_(self, name, float(value))
        if self.max_gpus_per_user is not None:
            set_(self, "max_gpus_per_user", float(self.max_gpus_per_user))
        if self.max_running_jobs_per_user is not None:
            set_(self, "max_running_jobs_per_user", int(self.max_running_jobs_per_user))
        if self.cpu_limit is not None:
            set_(self, "cpu_limit", int(self.cpu_limit))
        if self.memory_limit_bytes is not None:
            set_(self, "memory_limit_bytes", int(self.memory_limit_bytes))

    @property
    def is_open(self) -> bool:
        """True when every user may submit to it (no member list)."""
        return not self.members

    def admits(self, user: str) -> bool:
        return self.is_open or user in self.members


class ProjectChanges(TypedDict, total=False):
    """Fields of a project to change (any but its name); the changed project is checked as
    every Project is, so a value from JSON may arrive unchecked (InvalidProject names it)."""

    quota: float
    limit: float | None
    weight: float
    department: str | None
    members: tuple[str, ...]
    default_time_limit_s: float | None
    idle_timeout_s: float | None
    idle_threshold_pct: float
    idle_action: IdleAction | None
    preempt_min_runtime_s: float | None
    reclaim_min_runtime_s: float | None
    max_gpus_per_user: float | None
    max_running_jobs_per_user: int | None
    cpu_limit: int | None
    memory_limit_bytes: int | None


class ProjectEdit(ProjectChanges, total=False):
    """A change as the API asks for it: the fields, and members to add or remove."""

    add_members: tuple[str, ...]
    remove_members: tuple[str, ...]


def project_problems(p: Project) -> list[tuple[str, str]]:
    """(field, message) for every invalid field of `p` (run by Project itself, on creation)."""
    problems: list[tuple[str, str]] = []
    if (bad := _check_name(p.name, "a project name")) is not None:
        problems.append(("name", bad))
    quota_bad = _check_amount(p.quota, optional=False)
    if quota_bad is not None:
        problems.append(("quota", quota_bad))
    if (bad := _check_amount(p.limit, optional=True)) is not None:
        problems.append(("limit", bad))
    elif p.limit is not None and quota_bad is None and p.limit < p.quota:
        problems.append(("limit", f"must be >= quota ({p.quota:g}), got {p.limit:g}"))
    if not _is_number(p.weight) or not 0 < p.weight <= 1_000_000:
        problems.append(("weight", f"must be a number above 0, got {_got(p.weight)}"))
    if p.department is not None and (bad := _check_name(p.department, "a department name")):
        problems.append(("department", bad))
    if isinstance(p.members, (str, bytes)) or not isinstance(
        p.members, (list, tuple, set, frozenset)
    ):
        problems.append(("members", f"must be a list of user names, got {_got(p.members)}"))
    else:
        bad_users = [m for m in p.members if not isinstance(m, str) or not USER_RE.fullmatch(m)]
        if bad_users:
            problems.append(
                ("members", f"not a user name: {', '.join(_got(m) for m in bad_users)}")
            )
    t = p.default_time_limit_s
    if t is not None and (not _is_number(t) or not 0 < t <= MAX_TIME_LIMIT_S):
        problems.append(
            ("default_time_limit_s", f"must be a duration from 1s to 366 days, got {_got(t)}")
        )
    t = p.idle_timeout_s
    if t is not None and (not _is_number(t) or not 0 < t <= MAX_TIME_LIMIT_S):
        problems.append(
            ("idle_timeout_s", f"must be a duration from 1s to 366 days, got {_got(t)}")
        )
    if not _is_number(p.idle_threshold_pct) or not 0 < p.idle_threshold_pct <= 100:
        problems.append(
            (
                "idle_threshold_pct",
                f"must be a percentage above 0, got {_got(p.idle_threshold_pct)}",
            )
        )
    if p.idle_action is not None and p.idle_action not in {a.value for a in IdleAction}:
        words = ", ".join(a.value for a in IdleAction)
        problems.append(("idle_action", f"must be one of {words}, got {_got(p.idle_action)}"))
    for name in MIN_RUNTIME_FIELDS:
        if (bad := _check_min_runtime(getattr(p, name))) is not None:
            problems.append((name, bad))
    if (bad := _check_user_gpus(p.max_gpus_per_user)) is not None:
        problems.append(("max_gpus_per_user", bad))
    if (bad := _check_user_jobs(p.max_running_jobs_per_user)) is not None:
        problems.append(("max_running_jobs_per_user", bad))
    for name, what in (("cpu_limit", "CPUs"), ("memory_limit_bytes", "bytes")):
        value = getattr(p, name)
        if value is not None and not (
            isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**62
        ):
            problems.append((name, f"must be a whole number of {what} above 0, got {_got(value)}"))
    return problems


def _check_user_gpus(value: object) -> str | None:
    """None (no cap of the project's own) or a number of GPUs above 0."""
    if value is None or (_is_number(value) and 0 < value <= MAX_GPUS_QUOTA):
        return None
    return f"must be a number of GPUs above 0, got {_got(value)}"


def _check_user_jobs(value: object) -> str | None:
    """None (no cap of the project's own) or a whole number of jobs, 1 or more."""
    if value is None or (
        isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1_000_000
    ):
        return None
    return f"must be a whole number of jobs, 1 or more, got {_got(value)}"


def _check_min_runtime(value: object) -> str | None:
    """None (the pool's default) or a finite number of seconds >= 0 (0: no minimum)."""
    if value is None or (_is_number(value) and value >= 0):
        return None
    return f"must be a number of seconds, 0 or more, got {_got(value)}"


def parse_min_runtime(text: str) -> float:
    """Seconds from a duration as `parse_duration` reads it ('10m', '1h30m', '90s'), or 0 from
    a zero ('0', '0s', '0m'): a minimum run time of 0 means none. ValueError otherwise, a
    negative one included."""
    text = text.strip()
    if text.startswith("-"):
        raise ValueError(f"must be a duration of 0s or more, got {text!r}")
    if _ZERO_DURATION_RE.fullmatch(text):
        return 0.0
    return parse_duration(text)
