"""What the API can ask of the pool: submit, list, show, cancel, read logs, list GPUs.

The API layer only translates HTTP to these calls and back.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any

from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobSpec, JobState
from gpupool.core.project import DEFAULT_PROJECT, Project
from gpupool.engine.gpu_counts import GpuCounter
from gpupool.engine.log_lines import gpu_words, project_changes, project_fields
from gpupool.engine.loop import Engine
from gpupool.engine.projects import quota_warnings
from gpupool.policy import check_quota, check_satisfiable

MAX_LOG_CHUNK = 1 << 20
log = logging.getLogger("gpupool.projects")


class RequestRefused(ValueError):
    """A request that can never succeed (refused at submit, exit code 2 in the CLI)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class LogChunk:
    data: bytes
    offset: int  # where the next read starts
    state: JobState


class PoolService:
    def __init__(self, store: Any, executor: Any, engine: Engine, inventory: Inventory) -> None:
        self.store = store
        self.executor = executor
        self.engine = engine
        self.inventory = inventory
        self.gpus = GpuCounter(inventory)

    def submit(
        self,
        spec: JobSpec,
        user: str,
        now: float,
        token: str | None = None,
        *,
        project_given: bool | None = None,
    ) -> Job:
        """Queue a job. Its project is `spec.project` when one was given (`project_given`;
        by default, when it is not ""), else the user's (see `choose_project`)."""
        given = bool(spec.project) if project_given is None else project_given
        project = self.choose_project(user, spec.project if given else None)
        if project != spec.project:
            spec = dataclasses.replace(spec, project=project)
        impossible = check_satisfiable(spec.resources, self.inventory.nodes)
        if impossible is not None:
            raise RequestRefused("unsatisfiable", impossible.message)
        if self.engine.config.use_quotas:
            # Its project's quota or limit could never let it start (policy/quota_feasibility).
            projects = {p.name: p for p in self.store.projects()}
            never = check_quota(
                spec.resources,
                spec.is_preemptible,
                spec.priority,
                project,
                projects,
                self.inventory.nodes,
            )
            if never is not None:
                raise RequestRefused("quota_never_fits", never.message)
        if spec.workdir and not os.path.isdir(spec.workdir):
            raise RequestRefused(
                "bad_workdir",
                f"working directory {spec.workdir} does not exist on the pool's machine",
            )
        job: Job = self.store.submit(spec, user, now, token)
        log.info(
            "job %d submitted by %s to project %s: %s",
            job.id,
            user or "?",
            job.spec.project,
            gpu_words(self.gpus.asked(job)),
        )
        self.engine.wake()
        return job

    def choose_project(self, user: str, requested: str | None) -> str:
        """The project a job of `user` goes to: `requested`, else the user's default project,
        else the first project (by name) that lists the user as a member, else `default`.
        RequestRefused if it does not exist or does not admit the user."""
        projects: list[Project] = self.store.projects()
        by_name = {p.name: p for p in projects}
        name, hint = requested, ""
        if name is None:
            name = self.store.default_project(user)
            hint = (
                "; it is your default project: use --project, or change it with "
                "`gpupool project default`"
            )
            if name is None:
                hint = ""
                member_of = [p.name for p in projects if user in p.members]
                name = member_of[0] if member_of else DEFAULT_PROJECT
        project = by_name.get(name)
        if project is None:
            raise RequestRefused(
                "unknown_project", f"no project named {name}; see gpupool project list"
            )
        if not project.admits(user):
            raise RequestRefused(
                "not_a_member",
                f"{user} is not a member of project {name} "
                f"(members: {', '.join(project.members)}){hint}",
            )
        return name

    def get(self, job_id: int) -> Job:
        job: Job = self.store.get(job_id)
        return job

    def list(self, include_finished: bool = False, user: str | None = None) -> list[Job]:
        jobs: list[Job] = self.store.list_jobs(include_finished=include_finished, user=user)
        return jobs

    def explain(self, job_id: int) -> dict[str, Any]:
        """What the last scheduling pass said about a pending job: its status as data (the
        API renders it: api/wire.py), when it is expected to start (None: unknown), its
        reservation and priority factors."""
        decision = self.engine.last_decision
        status = decision.pending.get(job_id)
        reservation = next((r for r in decision.reservations if r.job_id == job_id), None)
        factors = decision.priorities.get(job_id)
        return {
            "status": status,
            "estimated_start": decision.estimated_start.get(job_id),
            "reservation": None
            if reservation is None
            else {
                "node": reservation.node,
                "gpus": list(reservation.gpus),
                "gpu_memory_bytes": reservation.gpu_memory_bytes,  # a fractional job's
                "time": reservation.time,
            },
            "priority_factors": None
            if factors is None
            else {
                "class": factors.klass,
                "fairshare": factors.fairshare,
                "age": factors.age,
                "size": factors.size,
                "score": factors.score,
            },
        }

    def cancel(self, job_id: int, user: str, now: float) -> Job:
        """Cancel a pending job at once; ask the engine to stop a running one (SIGTERM, grace,
        SIGKILL). Cancelling a finished job is a no-op that returns it."""
        cause = f"cancelled by {user}" if user else "cancelled"
        job = self.store.cancel_pending(job_id, now, cause)
        if job is not None:
            log.info("job %d CANCELLED before it started, by %s", job_id, user or "?")
            self.engine.wake()
            return job
        current: Job = self.store.get(job_id)
        if current.state is JobState.RUNNING and not current.cancel_requested:
            current = self.store.request_cancel(job_id, now, cause)
            log.info("job %d: cancel requested by %s", job_id, user or "?")
            self.engine.wake()
        return current

    def read_log(self, job_id: int, offset: int, limit: int = MAX_LOG_CHUNK) -> LogChunk:
        job = self.store.get(job_id)
        path = self.executor.log_path(job_id)
        data = b""
        try:
            with open(path, "rb") as f:
                # An offset at or past the end reads nothing (seeking far past it is EINVAL).
                if offset < os.fstat(f.fileno()).st_size:
                    f.seek(max(offset, 0))
                    data = f.read(min(limit, MAX_LOG_CHUNK))
        except FileNotFoundError:
            pass
        return LogChunk(data, max(offset, 0) + len(data), job.state)

    def gpu_holders(self) -> dict[tuple[str, int], list[Job]]:
        """The running jobs on each (node, GPU): one whole-GPU job, or fractional sharers."""
        holders: dict[tuple[str, int], list[Job]] = {}
        for job in self.store.active_jobs():
            if job.state is JobState.RUNNING and job.node:
                for g in job.gpus:
                    holders.setdefault((job.node, g), []).append(job)
        return holders

    def gpu_count(self, job: Job) -> float:
        """The GPUs `job` holds, or asks for before it runs (`GpuCounter.of`: the one rule)."""
        return self.gpus.of(job)

    def project_usage(self) -> dict[str, dict[str, float]]:
        """Per project: GPUs held by its running jobs and asked for by its pending ones (a
        shared GPU counts its fraction: `GpuCounter`), and its running and pending jobs."""
        usage: dict[str, dict[str, float]] = {}
        for job in self.store.active_jobs():
            u = usage.setdefault(
                job.spec.project,
                {"in_use_gpus": 0, "running_jobs": 0, "pending_jobs": 0, "pending_gpus": 0},
            )
            if job.state is JobState.RUNNING:
                u["in_use_gpus"] += self.gpus.of(job)
                u["running_jobs"] += 1
            elif job.state is JobState.PENDING:
                u["pending_jobs"] += 1
                u["pending_gpus"] += self.gpus.asked(job)
        return usage

    def create_project(self, project: Project, by: str) -> Project:
        created: Project = self.store.create_project(project)
        log.info("project %s created by %s: %s", project.name, by or "?", project_fields(created))
        self._warn_about_quotas()
        self.engine.wake()  # a first quota puts quotas in force: pending jobs are re-checked
        return created

    def set_project(self, name: str, changes: dict[str, Any], by: str) -> Project:
        """Change a project: any Project field, plus add_members / remove_members."""
        before: Project = self.store.project(name)  # UnknownProject
        changed: Project = self.store.set_project(name, **changes)
        log.info("project %s changed by %s: %s", name, by or "?", project_changes(before, changed))
        self._warn_about_quotas()
        self.engine.wake()  # quotas, limits and weights feed the next scheduling pass
        return changed

    def _warn_about_quotas(self) -> None:
        for warning in quota_warnings(self.store.projects(), self.inventory.total_gpus):
            log.warning("%s", warning)

    def delete_project(self, name: str, by: str) -> None:
        self.store.delete_project(name)
        log.info("project %s deleted by %s", name, by or "?")
        self.engine.wake()  # its quota gone: pending jobs are re-checked

    def set_default_project(self, user: str, project: str | None) -> None:
        """Make `project` the default of `user` (None: forget it); refused if the project
        would not take the user's jobs."""
        if project is not None:
            p: Project = self.store.project(project)  # UnknownProject
            if not p.admits(user):
                raise RequestRefused(
                    "not_a_member",
                    f"{user} is not a member of project {p.name} (members: {', '.join(p.members)})",
                )
        self.store.set_default_project(user, project)
