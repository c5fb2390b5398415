"""Projects as the API gives them (api/projects.py), typed: see client/views.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpupool.client.wire_json import Fields, JsonObject, JsonValue


@dataclass(frozen=True, slots=True)
class QuotaWarningView:
    """What is wrong with the quotas a created or changed project is part of
    (engine/quota_warnings.py): `code`, the projects, and the daemon's words."""

    code: str
    projects: tuple[str, ...]
    message: str


@dataclass(frozen=True, slots=True)
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
    in_use_gpus: float
    running_jobs: int
    pending_jobs: int
    pending_gpus: float
    # Only in the answer to a create or a change (none from an older daemon).
    warnings: tuple[QuotaWarningView, ...] = ()

    @classmethod
    def read(cls, f: Fields) -> ProjectView:
        return cls(
            name=f.text("name"),
            quota=f.number("quota"),
            limit=f.opt_number("limit"),
            weight=f.number("weight"),
            department=f.opt_text("department"),
            members=f.texts("members"),
            open=f.flag("open"),
            default_time_limit_s=f.opt_number("default_time_limit_s"),
            # absent from a daemon older than the idle policy: none
            idle_timeout_s=f.opt_number("idle_timeout_s") if "idle_timeout_s" in f.data else None,
            idle_threshold_pct=f.number("idle_threshold_pct")
            if "idle_threshold_pct" in f.data
            else 5.0,
            idle_action=f.opt_text("idle_action") if "idle_action" in f.data else None,
            in_use_gpus=f.number("in_use_gpus"),
            running_jobs=f.whole("running_jobs"),
            pending_jobs=f.whole("pending_jobs"),
            pending_gpus=f.number("pending_gpus"),
            warnings=tuple(
                QuotaWarningView(w.text("code"), w.texts("projects"), w.text("message"))
                for w in (Fields(v, at) for at, v in f.items("warnings", []))
            ),
        )


def read_project(value: JsonValue) -> ProjectView:
    return ProjectView.read(Fields(value))


@dataclass(frozen=True, slots=True)
class DepartmentView:
    name: str
    quota: float | None  # None: its projects' quotas are not capped together


@dataclass(frozen=True, slots=True)
class ProjectList:
    """GET /v1/projects; `wire` as received, for `project list --json`."""

    projects: tuple[ProjectView, ...]
    departments: tuple[DepartmentView, ...]
    wire: JsonObject = field(repr=False, compare=False)


def read_project_list(value: JsonValue) -> ProjectList:
    f = Fields(value)
    projects = tuple(ProjectView.read(Fields(v, at)) for at, v in f.items("projects"))
    departments = []
    for at, v in f.items("departments"):
        d = Fields(v, at)
        departments.append(DepartmentView(d.text("name"), d.opt_number("quota")))
    return ProjectList(projects, tuple(departments), f.data)


@dataclass(frozen=True, slots=True)
class DefaultProject:
    """A user's chosen default project (None: none chosen), where their jobs without
    --project go now (`effective`; None: they are refused, and `problem` says why)."""

    user: str
    project: str | None
    effective: str | None
    problem: str


def read_default_project(value: JsonValue) -> DefaultProject:
    f = Fields(value)
    return DefaultProject(
        f.text("user"), f.opt_text("project"), f.opt_text("effective"), f.text("problem")
    )
