"""The pool's projects as the service keeps them (PoolService's project methods): read by
every submission, changed only here (and by gpupool.toml, before the daemon serves); each
change is logged, re-read, and told to the engine (its next pass uses the new quotas)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from gpupool.core.project import Department, Project, ProjectEdit
from gpupool.service.project_lines import project_changes, project_fields
from gpupool.service.refusal import RequestRefused
from gpupool.spec.pool_config import quota_warnings

if TYPE_CHECKING:
    from gpupool.core.hardware import Inventory
    from gpupool.service.pool_service import EngineLink
    from gpupool.service.store_contracts import PoolStore

log = logging.getLogger("gpupool.projects")


class ProjectMethods:
    """PoolService's project methods; PoolService provides `store`, `engine`, `inventory`."""

    store: PoolStore
    engine: EngineLink
    inventory: Inventory

    def __init__(self) -> None:
        self._projects: dict[str, Project] | None = None
        self._defaults: dict[str, str | None] = {}
        self._defaults_generation = 0
        self._projects_lock = threading.Lock()

    def projects(self) -> list[Project]:
        return self.store.projects()

    def project(self, name: str) -> Project:
        """Project `name` as stored (UnknownProject)."""
        return self.store.project(name)

    def departments(self) -> list[Department]:
        return self.store.departments()

    def projects_by_name(self) -> dict[str, Project]:
        with self._projects_lock:
            if self._projects is None:
                self._projects = {p.name: p for p in self.store.projects()}
            return self._projects

    def default_project(self, user: str) -> str | None:
        """The project `user` chose as their default (`gpupool project default`), if any."""
        with self._projects_lock:
            if user in self._defaults:
                return self._defaults[user]
            generation = self._defaults_generation
        found = self.store.default_project(user)
        with self._projects_lock:
            if generation == self._defaults_generation:  # no change was written meanwhile
                self._defaults[user] = found
        return found

    def _projects_changed(self) -> None:
        """After a project write: read them again, and tell the engine (its next pass and
        the time limits of jobs submitted next use them)."""
        with self._projects_lock:
            projects = self.store.projects()
            self._projects = {p.name: p for p in projects}
            self._defaults.clear()  # a deleted project is nobody's default any more
            self._defaults_generation += 1
        self.engine.projects_changed(projects)

    def create_project(self, project: Project, by: str) -> Project:
        created = self.store.create_project(project)
        log.info("project %s created by %s: %s", project.name, by or "?", project_fields(created))
        self._projects_changed()  # a first quota puts quotas in force: pending jobs re-checked
        self._warn_about_quotas()
        return created

    def set_project(self, name: str, changes: ProjectEdit, by: str) -> Project:
        """Change a project: any Project field, plus add_members / remove_members."""
        before = self.store.project(name)  # UnknownProject
        changed = self.store.set_project(name, **changes)
        log.info("project %s changed by %s: %s", name, by or "?", project_changes(before, changed))
        self._projects_changed()  # quotas, limits and weights feed the next scheduling pass
        self._warn_about_quotas()
        return changed

    def _warn_about_quotas(self) -> None:
        projects = list(self.projects_by_name().values())
        for warning in quota_warnings(projects, self.inventory.total_gpus):
            log.warning("%s", warning)

    def delete_project(self, name: str, by: str) -> None:
        self.store.delete_project(name)
        log.info("project %s deleted by %s", name, by or "?")
        self._projects_changed()  # its quota gone: pending jobs are re-checked

    def set_default_project(self, user: str, project: str | None) -> None:
        """Make `project` the default of `user` (None: forget it); refused if the project
        would not take the user's jobs."""
        if project is not None:
            p = self.store.project(project)  # UnknownProject
            if not p.admits(user):
                raise RequestRefused(
                    "not_a_member",
                    f"{user} is not a member of project {p.name} (members: {', '.join(p.members)})",
                )
        self.store.set_default_project(user, project)
        with self._projects_lock:
            self._defaults.pop(user, None)
            self._defaults_generation += 1
