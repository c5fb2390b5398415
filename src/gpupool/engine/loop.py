"""The scheduling loop: one thread, woken by events (submit, exit, cancel) or a timer.

Only this thread starts, finishes and signals jobs, so the store's compare-and-swap only ever
races with submissions and cancellations from API threads, and a lost race just means one
more pass.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from gpupool.core.clock import Clock, SystemClock
from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobState
from gpupool.engine import log_lines
from gpupool.engine.environment import job_environment
from gpupool.engine.faults import LostJobs, end_time_of, gpus_outside, take_off_gone_gpus
from gpupool.engine.outcome import outcome_of
from gpupool.engine.preemption import Reclaimer
from gpupool.engine.quota_notes import note_quota_changes
from gpupool.policy import Decision, PendingJob, RunningJob, Snapshot, decide
from gpupool.policy.fairshare import UsageInterval, decayed_usage
from gpupool.policy.snapshot import PolicyConfig, Usage

log = logging.getLogger("gpupool.engine")


class Engine:
    def __init__(
        self,
        store: Any,
        executor: Any,
        inventory: Inventory,
        clock: Clock | None = None,
        poll_interval: float = 0.5,
        config: PolicyConfig | None = None,
        usage_refresh_s: float = 10.0,
    ) -> None:
        self.store = store
        self.executor = executor
        self.inventory = inventory
        self.clock = clock or SystemClock()
        self.poll_interval = poll_interval
        self.config = config or PolicyConfig()
        self.last_decision = Decision()
        self._usage = Usage()
        self._usage_at: float | None = None
        self.usage_refresh_s = usage_refresh_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._signalled: set[int] = set()  # running jobs whose cancel was delivered
        self.reclaimer = Reclaimer(store, executor)
        self.lost = LostJobs(store, executor)
        self._active: list[Job] = []  # active jobs as the last snapshot read them
        # Declared now; a GPU monitor will report live values later.
        self._unmanaged = {
            (n.name, g.index): g.unmanaged_memory_bytes
            for n in inventory.nodes
            for g in n.gpus
            if g.unmanaged_memory_bytes
        }
        self.passes = 0
        self._memory = {(n.name, g.index): g.memory_bytes for n in inventory.nodes for g in n.gpus}

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self.recover()
        self._thread = threading.Thread(target=self._run, name="gpupool-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=10)

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll_interval)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.run_pass()
            except Exception:  # the pool goes on; the next pass retries
                log.exception("scheduling pass failed")

    # -- recovery after a restart ----------------------------------------------------------
    def recover(self) -> None:
        """Re-adopt jobs the store says are RUNNING: each either still runs under its
        supervisor, has finished (its exit record says how), lost its supervisor, or was
        committed but never launched (the daemon died in between): launch that one now.
        A job on GPUs the inventory no longer has is taken off them (`take_off_gone_gpus`)."""
        for job in self.store.active_jobs():
            if job.state is not JobState.RUNNING:
                continue
            status = self.executor.adopt(job.id)
            name = getattr(status, "value", str(status))
            if name != "exited" and gpus_outside(job, self.inventory):
                now = self.clock.now()
                take_off_gone_gpus(self.store, self.reclaimer, self.inventory, job, status, now)
            elif name == "unlaunched" and self.reclaimer.archived_not_requeued(job):
                self.store.requeue(job.id, self.clock.now(), "preempted; requeued")
            elif name == "unlaunched":
                log.info("job %d was scheduled but never launched: launching it now", job.id)
                self._launch(job)
            elif name == "running":
                log.info("job %d is still running under its supervisor: re-adopted", job.id)
        self._check_running()

    # -- one pass --------------------------------------------------------------------------
    def run_pass(self) -> Decision:
        self.passes += 1
        self.executor.reap()
        self._check_running()
        decision = self._schedule()
        self._deliver_cancels()
        return decision

    def _check_running(self) -> None:
        """Finish jobs whose process ended; fail jobs whose supervisor vanished."""
        now = self.clock.now()
        for job in self.store.list_jobs():
            if job.state is not JobState.RUNNING:
                continue
            record = self.executor.read_exit(job.id)
            if record is not None and getattr(record, "reason", "") == "preempted":
                self.reclaimer.requeue(job, now)
                continue
            if record is not None:
                result = outcome_of(record, job.spec.time_limit_s)
                end = end_time_of(record, job, now)
                self.store.finish(
                    job.id,
                    result.state,
                    result.exit_code,
                    now,
                    result.cause,
                    result.reason,
                    end_time=end,
                )
                self._signalled.discard(job.id)
                log.info(
                    "%s",
                    log_lines.job_ended(job, result.state, result.exit_code, end, result.cause),
                )
                continue
            status = getattr(self.executor.status(job.id), "value", "")
            if status == "lost":
                # Its processes may still run on its GPUs: killed before they are freed.
                self.lost.settle(job, now)
            elif status == "unlaunched":
                if self.reclaimer.archived_not_requeued(job):
                    self.store.requeue(job.id, now, "preempted; requeued")
                else:
                    self._launch(job)

    def snapshot(self) -> Snapshot:
        # Read the version first: if anything changes after, the commit's CAS refuses.
        version = self.store.allocation_version()
        pending: list[PendingJob] = []
        running: list[RunningJob] = []
        # For backfill estimates only: a project's default limit stands in for a missing
        # --time (the supervisor enforces only the job's own limit).
        projects = {p.name: p for p in self.store.projects()}
        limits = {
            name: p.default_time_limit_s
            for name, p in projects.items()
            if p.default_time_limit_s is not None
        }
        self._active = self.store.active_jobs()
        for job in self._active:
            spec = job.spec
            if job.state is JobState.PENDING and not job.cancel_requested:
                pending.append(
                    PendingJob(
                        job.id,
                        spec.resources,
                        spec.priority,
                        job.submit_time,
                        job.user,
                        spec.project,
                        spec.time_limit_s or limits.get(spec.project),
                        spec.begin_time,
                        spec.is_preemptible,
                    )
                )
            elif job.state is JobState.RUNNING and job.node is not None:
                running.append(
                    RunningJob(
                        job.id,
                        job.node,
                        job.gpus,
                        spec.resources,
                        job.start_time or 0.0,
                        spec.priority,
                        job.user,
                        spec.project,
                        spec.time_limit_s or limits.get(spec.project),
                        spec.is_preemptible,
                        job.gpu_memory_bytes,
                    )
                )
        return Snapshot(
            self.inventory.nodes,
            tuple(pending),
            tuple(running),
            version,
            config=self.config,
            usage=self.usage(),
            projects=projects,
            unmanaged_memory=self._unmanaged,
        )

    def usage(self) -> Usage:
        """Decayed GPU-seconds per project and user, recomputed every usage_refresh_s: it
        moves slowly, and reading the history every pass would grow with it."""
        now = self.clock.now()
        if self._usage_at is None or now - self._usage_at >= self.usage_refresh_s:
            half_life = self.config.fairshare_half_life_s
            # Older than ten half-lives weighs under 0.1%: not worth reading.
            # GPUs counted as every view counts them: a shared GPU as its fraction.
            rows = self.store.usage_history(since=now - 10 * half_life, gpu_memory=self._memory)
            intervals = [UsageInterval(p, u, float(g), st, en) for p, u, g, st, en in rows]
            self._usage = decayed_usage(intervals, now, half_life)
            self._usage_at = now
        return self._usage

    def _schedule(self) -> Decision:
        snapshot = self.snapshot()
        now = self.clock.now()
        decision = decide(snapshot, now)
        if decision.starts:
            from gpupool.store import StaleState

            try:
                started = self.store.commit_starts(
                    [(s.job_id, s.node, s.gpus, s.gpu_memory_bytes) for s in decision.starts],
                    snapshot.version,
                    now,
                )
            except StaleState as exc:
                log.debug("decision refused as stale (%s); another pass follows", exc)
                self.wake()
                return decision
            for job in started:
                log.info("%s", log_lines.job_started(job))
                self._launch(job)
        self.last_decision = decision
        self.reclaimer.apply(decision)
        note_quota_changes(self.store, self._active, decision, now)  # before the new reasons
        self.store.set_reasons({jid: st.code.value for jid, st in decision.pending.items()})
        return decision

    def _launch(self, job: Job) -> None:
        spec = job.spec
        self.executor.launch(
            job.id,
            list(spec.command),
            job_environment(job),
            spec.workdir,
            spec.time_limit_s,
            spec.grace_s,
        )

    def _deliver_cancels(self) -> None:
        # The jobs the snapshot read: a cancel recorded after it wakes the next pass.
        for job in self._active:
            if job.state is JobState.RUNNING and job.cancel_requested:
                if job.id not in self._signalled and self.executor.cancel(job.id):
                    self._signalled.add(job.id)
                    log.info("job %d: stopping it (cancelled; %gs grace)", job.id, job.spec.grace_s)
