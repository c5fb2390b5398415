"""The Store's projects, departments, memberships and users' default projects.

A mixin of Store (repository.py), kept apart to keep each file readable. Every read returns
core objects (Project, Department); every write validates through them first, so the tables
only ever hold what a Project can be.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Unpack

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gpupool.core.job import JobState
from gpupool.core.project import (
    DEFAULT_PROJECT,
    Department,
    IdleAction,
    InvalidProject,
    Project,
    ProjectChanges,
)
from gpupool.core.store_errors import ProjectExists, ProjectInUse, UnknownProject
from gpupool.store.models import (
    DepartmentRow,
    JobRow,
    ProjectMemberRow,
    ProjectRow,
    UserDefaultRow,
)
from gpupool.store.sessions import SessionMethods

_ACTIVE_STATES = tuple(s for s in JobState if not s.terminal)
# What set_project may change (members through add_members/remove_members or members=).
CHANGEABLE = frozenset(f.name for f in dataclasses.fields(Project)) - {"name"}


class ProjectMethods(SessionMethods):
    """Store methods for projects; Store provides the sessions."""

    # -- reading

    def projects(self) -> list[Project]:
        """Every project, by name."""
        with self._read() as s:
            return _load(s)

    def project(self, name: str) -> Project:
        with self._read() as s:
            found = _load(s, name)
        if not found:
            raise UnknownProject(name)
        return found[0]

    def departments(self) -> list[Department]:
        with self._read() as s:
            rows = s.scalars(select(DepartmentRow).order_by(DepartmentRow.name)).all()
            return [Department(r.name, r.quota) for r in rows]

    def default_project(self, user: str) -> str | None:
        """The project `user` chose for jobs that name none, or None."""
        with self._read() as s:
            row = s.get(UserDefaultRow, user)
            return None if row is None else row.project

    def user_defaults(self) -> dict[str, str]:
        with self._read() as s:
            return dict(s.execute(select(UserDefaultRow.user, UserDefaultRow.project)).all())

    # -- writing

    def upsert_project(self, project: Project) -> Project:
        """Create or replace `project` entirely (members included). A department it names
        that does not exist yet is created (with no quota)."""
        return self._write_once_more_on_conflict(lambda s: _save(s, project))

    def create_project(self, project: Project) -> Project:
        """Like upsert_project, but ProjectExists if the name is taken."""

        def op(s: Session) -> Project:
            if s.get(ProjectRow, project.name) is not None:
                raise ProjectExists(project.name)
            return _save(s, project)

        return self._write_once_more_on_conflict(op)

    def set_project(
        self,
        name: str,
        *,
        add_members: Iterable[str] = (),
        remove_members: Iterable[str] = (),
        **changes: Unpack[ProjectChanges],
    ) -> Project:
        """Change some fields of a project (InvalidProject if the result would be invalid:
        nothing is written then). Removing a user who is not a member is an error."""
        unknown = set(changes) - CHANGEABLE
        if unknown:
            raise TypeError(f"set_project: unknown fields {', '.join(sorted(unknown))}")
        add, remove = list(add_members), list(remove_members)

        def op(s: Session) -> Project:
            found = _load(s, name)
            if not found:
                raise UnknownProject(name)
            current = found[0]
            members = set(changes.get("members", current.members))
            missing = sorted(set(remove) - members)
            if missing:
                listed = ", ".join(sorted(members)) or "none: it is open to every user"
                raise InvalidProject(
                    [
                        (
                            "members",
                            f"{', '.join(missing)} is not a member of project {name} "
                            f"(members: {listed})",
                        )
                    ]
                )
            members = (members | set(add)) - set(remove)
            edited: ProjectChanges = {**changes, "members": tuple(members)}
            return _save(s, dataclasses.replace(current, **edited))

        return self._write_once_more_on_conflict(op)

    def delete_project(self, name: str) -> None:
        """Delete a project, its member list and the user defaults pointing at it. Refused
        (ProjectInUse) for the default project and for one with active jobs."""
        if name == DEFAULT_PROJECT:
            raise ProjectInUse(
                "the default project cannot be deleted: jobs of users without a project go there"
            )
        with self._write() as s:
            if s.get(ProjectRow, name) is None:
                raise UnknownProject(name)
            active = list(
                s.scalars(
                    select(JobRow.id)
                    .where(JobRow.project == name, JobRow.state.in_(_ACTIVE_STATES))
                    .order_by(JobRow.id)
                )
            )
            if active:
                ids = ", ".join(map(str, active[:10])) + (", ..." if len(active) > 10 else "")
                raise ProjectInUse(
                    f"project {name} has {len(active)} active job(s) (ids {ids}): "
                    f"cancel them or wait for them to end first"
                )
            s.execute(delete(ProjectMemberRow).where(ProjectMemberRow.project == name))
            s.execute(delete(UserDefaultRow).where(UserDefaultRow.project == name))
            s.execute(delete(ProjectRow).where(ProjectRow.name == name))

    def upsert_department(self, department: Department) -> Department:
        def op(s: Session) -> Department:
            row = s.get(DepartmentRow, department.name)
            if row is None:
                s.add(DepartmentRow(name=department.name, quota=department.quota))
            else:
                row.quota = department.quota
            return department

        return self._write_once_more_on_conflict(op)

    def set_default_project(self, user: str, project: str | None) -> None:
        """Make `project` the one `user`'s jobs go to when they name none (None: forget it)."""

        def op(s: Session) -> None:
            row = s.get(UserDefaultRow, user)
            if project is None:
                if row is not None:
                    s.delete(row)
                return
            if s.get(ProjectRow, project) is None:
                raise UnknownProject(project)
            if row is None:
                s.add(UserDefaultRow(user=user, project=project))
            else:
                row.project = project

        self._write_once_more_on_conflict(op)


# -- helpers (inside the caller's transaction)


def _load(s: Session, name: str | None = None) -> list[Project]:
    stmt = select(ProjectRow).order_by(ProjectRow.name)
    members_stmt = select(ProjectMemberRow.project, ProjectMemberRow.user)
    if name is not None:
        stmt = stmt.where(ProjectRow.name == name)
        members_stmt = members_stmt.where(ProjectMemberRow.project == name)
    rows = s.scalars(stmt).all()
    members: dict[str, list[str]] = {}
    for project, user in s.execute(members_stmt):
        members.setdefault(project, []).append(user)
    return [
        Project(
            name=r.name,
            quota=r.quota,
            limit=r.gpu_limit,
            weight=r.weight,
            department=r.department,
            members=tuple(members.get(r.name, ())),
            default_time_limit_s=r.default_time_limit_s,
            idle_timeout_s=r.idle_timeout_s,
            idle_threshold_pct=r.idle_threshold_pct,
            idle_action=None if r.idle_action is None else IdleAction(r.idle_action),
            preempt_min_runtime_s=r.preempt_min_runtime_s,
            reclaim_min_runtime_s=r.reclaim_min_runtime_s,
            max_gpus_per_user=r.max_gpus_per_user,
            max_running_jobs_per_user=r.max_running_jobs_per_user,
            cpu_limit=r.cpu_limit,
            memory_limit_bytes=r.memory_limit_bytes,
        )
        for r in rows
    ]


def _save(s: Session, p: Project) -> Project:
    if p.department is not None and s.get(DepartmentRow, p.department) is None:
        s.add(DepartmentRow(name=p.department, quota=None))
        s.flush()  # before the project row that refers to it
    row = s.get(ProjectRow, p.name)
    if row is None:
        row = ProjectRow(name=p.name)
        s.add(row)
    row.quota, row.gpu_limit, row.weight = p.quota, p.limit, p.weight
    row.department, row.default_time_limit_s = p.department, p.default_time_limit_s
    row.idle_timeout_s, row.idle_threshold_pct = p.idle_timeout_s, p.idle_threshold_pct
    row.idle_action = None if p.idle_action is None else p.idle_action.value
    row.preempt_min_runtime_s = p.preempt_min_runtime_s
    row.reclaim_min_runtime_s = p.reclaim_min_runtime_s
    row.max_gpus_per_user = p.max_gpus_per_user
    row.max_running_jobs_per_user = p.max_running_jobs_per_user
    row.cpu_limit = p.cpu_limit
    row.memory_limit_bytes = p.memory_limit_bytes
    s.flush()
    s.execute(delete(ProjectMemberRow).where(ProjectMemberRow.project == p.name))
    s.add_all(ProjectMemberRow(project=p.name, user=u) for u in p.members)
    s.flush()
    return p
