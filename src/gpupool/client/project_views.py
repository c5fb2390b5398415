"""Projects as the API gives them (api/projects.py), typed: see client/views.py."""

from __future__ import annotations

from gpupool.client.wire_json import JsonObject, JsonValue, conform, json_of
from gpupool.core.values import record, unlisted
from gpupool.core.wire_shapes import DefaultProjectWire, ProjectListWire, ProjectWire


@record
class QuotaWarningView:
    """What is wrong with the quotas a created or changed project is part of
    (spec/quota_warnings.py): `code`, the projects, and the daemon's words."""

    code: str
    projects: tuple[str, ...]
    message: str


@record
class ProjectView:
    """A project: its GPU quota, limit (None: none) and weight, members (empty: open to
    every user), and what its jobs hold and ask for now."""

    name: str
    quota: float
    limit: float | None
    weight: float
    department: str | None
    members: tuple[str, ...]
    open: bool
    default_time_limit_s: float | None
    idle_timeout_s: float | None
    idle_threshold_pct: float
    idle_action: str | None  # None: stop interactive jobs, notify the others
    # Seconds a job runs before a higher priority class may preempt it / another project
    # reclaim its GPUs; None: the pool's default (absent from an older daemon: None too).
    preempt_min_runtime_s: float | None
    reclaim_min_runtime_s: float | None
    # The most GPUs one user's running jobs of the project may hold, the most running jobs one
    # user may have in it; None: the pool's default, else no cap (an older daemon: None too).
    max_gpus_per_user: float | None
    max_running_jobs_per_user: int | None
    # The most CPUs / bytes of host memory its running jobs may hold at once (their --cpus,
    # --mem); None: no cap (an older daemon: None too).
    cpu_limit: int | None
    memory_limit_bytes: int | None
    in_use_gpus: float
    running_jobs: int
    pending_jobs: int
    pending_gpus: float
    # Only in the answer to a create or a change (none from an older daemon).
    warnings: tuple[QuotaWarningView, ...] = ()

    @classmethod
    def read(cls, w: ProjectWire) -> ProjectView:
        return cls(
            name=w["name"],
            quota=w["quota"],
            limit=w["limit"],
            weight=w["weight"],
            department=w["department"],
            members=tuple(w["members"]),
            open=w["open"],
            default_time_limit_s=w["default_time_limit_s"],
            # absent from a daemon older than the idle policy: none
            idle_timeout_s=w.get("idle_timeout_s"),
            idle_threshold_pct=w.get("idle_threshold_pct", 5.0),
            idle_action=w.get("idle_action"),
            preempt_min_runtime_s=w.get("preempt_min_runtime_s"),
            reclaim_min_runtime_s=w.get("reclaim_min_runtime_s"),
            max_gpus_per_user=w.get("max_gpus_per_user"),
            max_running_jobs_per_user=w.get("max_running_jobs_per_user"),
            cpu_limit=w.get("cpu_limit"),
            memory_limit_bytes=w.get("memory_limit_bytes"),
            in_use_gpus=w["in_use_gpus"],
            running_jobs=w["running_jobs"],
            pending_jobs=w["pending_jobs"],
            pending_gpus=w["pending_gpus"],
            warnings=tuple(
                QuotaWarningView(q["code"], tuple(q["projects"]), q["message"])
                for q in w.get("warnings", [])
            ),
        )


def read_project(value: JsonValue) -> ProjectView:
    return ProjectView.read(conform(ProjectWire, value))


@record
class DepartmentView:
    name: str
    quota: float | None  # None: its projects' quotas are not capped together


@record
class ProjectList:
    """GET /v1/projects; `wire` as received, for `project list --json`."""

    projects: tuple[ProjectView, ...]
    departments: tuple[DepartmentView, ...]
    wire: JsonObject = unlisted()


def read_project_list(value: JsonValue) -> ProjectList:
    w = conform(ProjectListWire, value)
    projects = tuple(ProjectView.read(p) for p in w["projects"])
    departments = tuple(DepartmentView(d["name"], d["quota"]) for d in w["departments"])
    return ProjectList(projects, departments, json_of(w))


@record
class DefaultProject:
    """A user's chosen default project (None: none chosen), where their jobs without
    --project go now (`effective`; None: they are refused, and `problem` says why)."""

    user: str
    project: str | None
    effective: str | None
    problem: str


def read_default_project(value: JsonValue) -> DefaultProject:
    w = conform(DefaultProjectWire, value)
    return DefaultProject(w["user"], w["project"], w["effective"], w["problem"])
