"""/v1/projects: list, create, change and delete projects; users' default projects.

Everyone may read them. Pool admins create, delete and change projects; a project's admins
may change its members and default time limit (core/access.py). Everyone sets their own
default project; a pool admin sets anyone's. Every change is in the audit log. The caller is
the server's (api/identity.py): a `user` a client still sends is ignored.
"""

from __future__ import annotations

from typing import Any, cast

from fastapi import APIRouter, Body

from gpupool.api.identity import Access, CallerDep
from gpupool.api.openapi import refusals
from gpupool.core.access import Action, Target, project_change_action
from gpupool.core.audit import AuditAction
from gpupool.core.project import InvalidProject, Project, ProjectEdit
from gpupool.core.wire_shapes import (
    DefaultProjectWire,
    DeletedWire,
    DepartmentWire,
    ProjectListWire,
    ProjectWire,
)
from gpupool.service import PoolService, RequestRefused
from gpupool.service.project_lines import project_changes, project_fields
from gpupool.spec.quota_warnings import quota_problems

# Project fields a request may set; members also through add_members / remove_members.
FIELDS = (
    "quota",
    "limit",
    "weight",
    "department",
    "members",
    "default_time_limit_s",
    "idle_timeout_s",
    "idle_threshold_pct",
    "idle_action",
    "preempt_min_runtime_s",
    "reclaim_min_runtime_s",
    "max_gpus_per_user",
    "max_running_jobs_per_user",
    "cpu_limit",
    "memory_limit_bytes",
)
EDITS = ("add_members", "remove_members")


def project_to_wire(p: Project, usage: dict[str, float] | None = None) -> ProjectWire:
    usage = usage or {}
    return {
        "name": p.name,
        "quota": p.quota,
        "limit": p.limit,
        "weight": p.weight,
        "department": p.department,
        "members": list(p.members),
        "open": p.is_open,
        "default_time_limit_s": p.default_time_limit_s,
        "idle_timeout_s": p.idle_timeout_s,
        "idle_threshold_pct": p.idle_threshold_pct,
        "idle_action": None if p.idle_action is None else p.idle_action.value,
        "preempt_min_runtime_s": p.preempt_min_runtime_s,
        "reclaim_min_runtime_s": p.reclaim_min_runtime_s,
        "max_gpus_per_user": p.max_gpus_per_user,
        "max_running_jobs_per_user": p.max_running_jobs_per_user,
        "cpu_limit": p.cpu_limit,
        "memory_limit_bytes": p.memory_limit_bytes,
        "in_use_gpus": usage.get("in_use_gpus", 0),
        "running_jobs": int(usage.get("running_jobs", 0)),  # counts (floats in `usage`)
        "pending_jobs": int(usage.get("pending_jobs", 0)),
        "pending_gpus": usage.get("pending_gpus", 0),
    }


def _with_warnings(service: PoolService, wire: ProjectWire) -> ProjectWire:
    """A created or changed project's answer, with what is wrong with the quotas it is part
    of (spec/quota_warnings.py), for the admin who made the change: the daemon's log is not
    where they look."""
    name = wire["name"]
    found = quota_problems(service.projects_by_name().values(), service.inventory.total_gpus)
    wire["warnings"] = [w.to_wire() for w in found if name in w.projects]
    return wire


def _fields(body: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """The project fields of a request body (all but `user`); InvalidProject for unknown ones
    or for a member list that is not a list."""
    fields = {k: v for k, v in body.items() if k != "user"}
    unknown = sorted(set(fields) - set(allowed))
    problems = [(k, f"unknown field (known: {', '.join(allowed)})") for k in unknown]
    for key in ("members", *EDITS):
        if key in fields:
            if not isinstance(fields[key], list):
                problems.append((key, f"must be a list of user names, got {fields[key]!r}"))
            else:
                fields[key] = tuple(fields[key])
    if problems:
        raise InvalidProject(problems)
    return fields


def add_routes(app: APIRouter, service: PoolService, access: Access) -> None:
    @app.get("/v1/projects")
    def list_projects() -> ProjectListWire:
        usage = service.project_usage()
        departments: list[DepartmentWire] = [
            {"name": d.name, "quota": d.quota} for d in service.departments()
        ]
        return {
            "projects": [project_to_wire(p, usage.get(p.name)) for p in service.projects()],
            "departments": departments,
        }

    @app.get("/v1/projects/{name}", responses=refusals(404))
    def show_project(name: str) -> ProjectWire:
        return project_to_wire(service.project(name), service.project_usage().get(name))

    @app.post("/v1/projects", status_code=201, responses=refusals(403, 409))
    def create_project(caller: CallerDep, body: dict[str, Any] = Body(...)) -> ProjectWire:
        access.require(caller, Action.MANAGE_PROJECTS, Target(project=str(body.get("name"))))
        fields = _fields({k: v for k, v in body.items() if k != "name"}, FIELDS)
        fields["name"] = body.get("name")  # as sent, even missing: Project checks every field
        project = service.create_project(Project(**fields), caller.name)
        access.audit(
            caller, AuditAction.CREATE_PROJECT, f"project {project.name}", project_fields(project)
        )
        return _with_warnings(service, project_to_wire(project))

    @app.patch("/v1/projects/{name}", responses=refusals(403, 404))
    def set_project(name: str, caller: CallerDep, body: dict[str, Any] = Body(...)) -> ProjectWire:
        # Known fields only (_fields); their JSON values are checked as the project is changed.
        changes = cast(ProjectEdit, _fields(body, FIELDS + EDITS))
        action = project_change_action(frozenset(changes))
        access.require(caller, action, Target(project=name))
        before = service.project(name)  # UnknownProject
        project = service.set_project(name, changes, caller.name)
        access.audit(
            caller,
            AuditAction.CHANGE_PROJECT,
            f"project {name}",
            project_changes(before, project),
        )
        return _with_warnings(service, project_to_wire(project, service.project_usage().get(name)))

    @app.delete("/v1/projects/{name}", responses=refusals(403, 404, 409))
    def delete_project(name: str, caller: CallerDep) -> DeletedWire:
        access.require(caller, Action.MANAGE_PROJECTS, Target(project=name))
        service.delete_project(name, caller.name)
        access.audit(caller, AuditAction.DELETE_PROJECT, f"project {name}")
        return {"deleted": name}

    @app.get("/v1/projects/defaults/{user}")
    def get_default(user: str) -> DefaultProjectWire:
        """The user's chosen default (None if none) and where their jobs would go now."""
        try:
            effective: str | None = service.choose_project(user, None)
            problem = ""
        except RequestRefused as exc:
            effective, problem = None, exc.message
        return {
            "user": user,
            "project": service.default_project(user),
            "effective": effective,
            "problem": problem,
        }

    @app.put("/v1/projects/defaults/{user}", responses=refusals(403, 404))
    def set_default(
        user: str, caller: CallerDep, project: str | None = Body(None, embed=True)
    ) -> DefaultProjectWire:
        access.require(caller, Action.SET_DEFAULT_PROJECT, Target(owner=user))
        service.set_default_project(user, project)
        if user != caller.name:
            access.audit(
                caller, AuditAction.SET_DEFAULT_PROJECT, f"user {user}", f"project {project}"
            )
        return get_default(user)
