"""The Ray backend: runs as Ray jobs, through the head's job submission API.

Calls (docs/backends.md, "Ray"): `launch` is one `submit_job`, `poll` ONE `list_jobs` for
every handle asked about (and one node list while one of them is PENDING: capacity.py says
why it waits), `signal` one `stop_job`, `logs` one `get_job_logs` per attempt,
`health` one version request. Every HTTP call has the settings' deadline
(`request_timeout_s`): Ray's client has none of its own, so `_TimedClient` adds it.

A head that cannot be reached: `poll` answers UNKNOWN for every handle (the detail says
why), `launch` leaves the run unlaunched (the next poll that reaches the head answers
UNLAUNCHED, and the engine launches it again), `signal` answers False; nothing raises.

What a poll cannot learn from the head is kept in `state_dir/runs/ID.json`, one small
file per run (`RunMarks`): that the run was submitted, so a run the head no longer knows
was lost with it (the head restarted) rather than never launched; or that the head refused
it, so the refusal is reported once as a run that could not start.
"""

from __future__ import annotations

import json
import os
import signal as signals
import threading
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import requests
from ray.exceptions import RayError
from ray.job_submission import JobDetails, JobStatus, JobSubmissionClient

from gpupool.backends.base import RemoteExecutor
from gpupool.backends.ray.capacity import (
    ACTORS_ENDPOINT,
    NodeTotals,
    asks_of,
    engine_nodes,
    gpus_in_use,
    live_nodes,
    never_fits,
)
from gpupool.backends.ray.render import META_ASKS, META_TIME_LIMIT, render
from gpupool.backends.ray.settings import RaySettings
from gpupool.core.backends import (
    BackendContext,
    BackendHealth,
    BackendKind,
    Capacity,
    run_name,
    summary_line,
)
from gpupool.core.execution import (
    Capabilities,
    ExitReason,
    ExitRecord,
    Handle,
    LaunchRequest,
    LogChunk,
    Observation,
    RunState,
    StopKind,
)

TIMEOUT_EXIT = 124  # the single-process entrypoint's `timeout`, the gang driver's limit
NO_IMAGES = "container images are not run by the Ray backend (its capabilities: containers False)"
HEAD_LOST = "the Ray head no longer knows this run (it restarted, losing its jobs): the run is gone"
# A run stopped while Ray held it PENDING: Ray's stop_job only queues a call to the job's
# supervisor actor, which runs when that actor starts, so Ray keeps the job PENDING until
# then (or until its start timeout fails it). The pool takes the stop as done at once.
STOPPED_WAITING = (
    "stopped while it waited in Ray's queue (Ray ends its job when the job's supervisor "
    "starts, or fails it at its job start timeout)"
)
# The state API's node list: one call per poll, made only while one of its runs is PENDING.
NODES_ENDPOINT = "/api/v0/nodes?limit=10000&detail=false"
# What a call to the head can raise when it is down, slow or answers an error (the client
# turns HTTP errors into RuntimeError, a refused connection into ConnectionError, a head
# that wants a token into ray's AuthenticationError, a RayError).
_HEAD_ERRORS = (requests.RequestException, OSError, RuntimeError, ValueError, RayError)


class _TimedClient(JobSubmissionClient):
    """Ray's client with a deadline on every request (it passes `**kwargs` to requests)."""

    def __init__(self, address: str, timeout_s: float) -> None:
        self._timeout_s = timeout_s  # set first: the constructor already asks the head
        super().__init__(address)

    def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self._timeout_s)
        response: requests.Response = super()._do_request(method, endpoint, **kwargs)
        return response


class RunMarks:
    """`DIR/ID.json` per run: {"submitted": true} or {"refused": "the head's words"}."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def _path(self, submission_id: str) -> Path:
        return self.dir / f"{submission_id}.json"

    def write(self, submission_id: str, mark: Mapping[str, object]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self._path(submission_id)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(mark)), encoding="utf-8")
        os.replace(tmp, path)

    def read(self, submission_id: str) -> dict[str, object] | None:
        try:
            found = json.loads(self._path(submission_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def forget(self, submission_id: str) -> None:
        self._path(submission_id).unlink(missing_ok=True)


def _seconds(ms: int | None, default: float) -> float:
    return ms / 1000.0 if ms is not None else default


def _timed_out(job: JobDetails, code: int) -> bool:
    """Ended by its time limit: the limit's exit code, after at least the limit."""
    limit = (job.metadata or {}).get(META_TIME_LIMIT)
    if code != TIMEOUT_EXIT or limit is None or job.start_time is None or job.end_time is None:
        return False
    return (job.end_time - job.start_time) / 1000.0 >= float(limit)


def waiting_detail(job: JobDetails, nodes: list[NodeTotals] | None) -> str:
    """Why a PENDING job waits: that it can never start on the live nodes (capacity.py),
    when `nodes` say so; else Ray's own message."""
    asks = asks_of(job.metadata, META_ASKS)
    never = never_fits(asks, nodes) if nodes is not None else None
    if never is not None:
        return f"{never} (Ray fails it after its job start timeout unless a node that fits joins)"
    return job.message or ""


def observe(
    job: JobDetails,
    ref: str,
    preempted: bool,
    now_s: float,
    nodes: list[NodeTotals] | None = None,
    stop_asked: StopKind | None = None,
) -> Observation:
    """One Ray job's state as the contract's Observation (the table in the docs); `nodes`,
    the cluster's live nodes where known, say why a PENDING job waits; `stop_asked`, a stop
    this backend asked for (RunMarks), ends a run Ray still holds PENDING."""
    status, message = job.status, job.message or ""
    if status is JobStatus.PENDING and stop_asked is not None:
        term = int(signals.SIGTERM)
        reason = stop_asked.exit_reason
        record = ExitRecord(128 + term, term, reason, now_s, now_s, STOPPED_WAITING)
        return Observation(RunState.EXITED, exit=record, ref=ref)
    if status is JobStatus.PENDING:
        return Observation(RunState.QUEUED, ref=ref, detail=waiting_detail(job, nodes))
    if status is JobStatus.RUNNING:
        return Observation(RunState.RUNNING, ref=ref)
    start = _seconds(job.start_time, now_s)
    end = _seconds(job.end_time, now_s)
    raw = job.driver_exit_code
    sig = -raw if raw is not None and raw < 0 else None
    code = 128 + sig if sig is not None else raw
    if status is JobStatus.SUCCEEDED:
        record = ExitRecord(0, None, ExitReason.EXITED, start, end, message)
    elif status is JobStatus.STOPPED:
        reason = ExitReason.PREEMPTED if preempted else ExitReason.CANCELLED
        stopped = code if code is not None else 128 + signals.SIGTERM
        record = ExitRecord(stopped, sig or signals.SIGTERM, reason, start, end, message)
    else:  # FAILED
        failed = code if code is not None else 1
        reason = ExitReason.TIMEOUT if _timed_out(job, failed) else ExitReason.EXITED
        record = ExitRecord(failed, sig, reason, start, end, message)
    return Observation(RunState.EXITED, exit=record, ref=ref)


class RayBackend(RemoteExecutor):
    """A `[backends.NAME]` table of kind "ray" (module docstring)."""

    def __init__(self, name: str, settings: RaySettings, context: BackendContext) -> None:
        self._name = name
        self.settings = settings
        self.context = context
        self.marks = RunMarks(context.state_dir / "runs")
        self._client: JobSubmissionClient | None = None
        self._lock = threading.Lock()
        self._preempting: set[Handle] = set()  # stopped as a preemption (not kept on disk)

    @property
    def name(self) -> str:
        return self._name

    @property
    def kind(self) -> BackendKind:
        return BackendKind.RAY

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(multi_node=True, adopts_after_restart=True, fractional_gpus=True)

    def ref(self, submission_id: str) -> str:
        return f"ray://{self.settings.host_port}/{submission_id}"

    def _connect(self) -> JobSubmissionClient:
        """The client, made at the first call that needs it (making it asks the head)."""
        with self._lock:
            if self._client is None:
                self._client = _TimedClient(self.settings.address, self.settings.request_timeout_s)
            return self._client

    def launch(self, request: LaunchRequest) -> None:
        if request.container is not None:  # declared: containers False (capabilities)
            self.marks.write(run_name(self.context.pool_id, request.handle), {"refused": NO_IMAGES})
            return  # never run on the host instead: the poll says SPAWN_FAILED, and why
        submission = render(request, self.settings, self.context.pool_id)
        sid = submission.submission_id
        try:
            client = self._connect()
        except _HEAD_ERRORS:
            return  # unlaunched: the next poll that reaches the head says so
        try:
            client.submit_job(
                entrypoint=submission.entrypoint,
                submission_id=sid,
                runtime_env=dict(submission.runtime_env),
                metadata=dict(submission.metadata),
                entrypoint_num_gpus=submission.entrypoint_num_gpus,
                entrypoint_num_cpus=submission.entrypoint_num_cpus,
                entrypoint_memory=submission.entrypoint_memory,
                entrypoint_resources=submission.entrypoint_resources,
                entrypoint_label_selector=submission.entrypoint_label_selector,
            )
        except requests.RequestException:
            return  # the head did not answer: unlaunched, or launched if it got it (poll)
        except (RuntimeError, ValueError, RayError) as exc:
            # Refused: a duplicate (already launched: kept as it is) or a bad submission.
            if not self._exists(client, sid):
                self.marks.write(sid, {"refused": str(exc)[:2000]})
                return
        self.marks.write(sid, {"submitted": True})

    def _exists(self, client: JobSubmissionClient, submission_id: str) -> bool:
        try:
            client.get_job_info(submission_id)
        except _HEAD_ERRORS:
            return False
        return True

    def poll(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        names = {h: run_name(self.context.pool_id, h) for h in handles}
        if not names:
            return {}
        try:
            jobs = self._connect().list_jobs()
        except _HEAD_ERRORS as exc:
            why = f"the Ray head at {self.settings.address} cannot be reached: {exc}"[:500]
            return {
                h: Observation(RunState.UNKNOWN, ref=self.ref(n), detail=why)
                for h, n in names.items()
            }
        by_id = {job.submission_id: job for job in jobs if job.submission_id is not None}
        now_s = time.time()
        pending = any(
            (job := by_id.get(sid)) is not None and job.status is JobStatus.PENDING
            for sid in names.values()
        )
        nodes = self._live_nodes() if pending else None
        out: dict[Handle, Observation] = {}
        for handle, sid in names.items():
            job = by_id.get(sid)
            if job is not None:
                preempted = handle in self._preempting
                asked = self._stop_asked(sid) if job.status is JobStatus.PENDING else None
                out[handle] = observe(job, self.ref(sid), preempted, now_s, nodes, asked)
            else:
                out[handle] = self._absent(sid, now_s)
        return out

    def _stop_asked(self, submission_id: str) -> StopKind | None:
        """The stop this backend asked for the run, from its mark (`signal`)."""
        asked = (self.marks.read(submission_id) or {}).get("stop")
        return StopKind(asked) if isinstance(asked, str) and asked in set(StopKind) else None

    def _live_nodes(self) -> list[NodeTotals] | None:
        """The cluster's live nodes and their totals (one state API call), None when the
        head does not answer it: then nothing is claimed about a waiting job."""
        try:
            answer = self._connect()._do_request("GET", NODES_ENDPOINT)
            answer.raise_for_status()
            return live_nodes(answer.json())
        except (*_HEAD_ERRORS, AttributeError):
            return None

    def _absent(self, submission_id: str, now_s: float) -> Observation:
        """A run the head does not list: never launched, refused, or lost with the head."""
        mark = self.marks.read(submission_id)
        ref = self.ref(submission_id)
        if mark is None:
            return Observation(RunState.UNLAUNCHED)
        refused = mark.get("refused")
        if isinstance(refused, str):
            record = ExitRecord(1, None, ExitReason.SPAWN_FAILED, now_s, now_s, refused)
            return Observation(RunState.EXITED, exit=record, ref=ref)
        record = ExitRecord(1, None, ExitReason.EXITED, now_s, now_s, HEAD_LOST)
        return Observation(RunState.EXITED, exit=record, ref=ref)

    def signal(self, handle: Handle, kind: StopKind) -> bool:
        sid = run_name(self.context.pool_id, handle)
        try:
            client = self._connect()
            # A run already over is left as it is (the contract), whatever Ray's stop_job
            # says: it answered True for a job already STOPPED while its supervisor actor
            # was still going away (seen once in the contract suite under CI).
            if client.get_job_status(sid).is_terminal():
                return False
            stopped = bool(client.stop_job(sid))
        except _HEAD_ERRORS:
            return False
        if stopped and kind is StopKind.PREEMPT:
            self._preempting.add(handle)
        elif stopped:
            self._preempting.discard(handle)  # a cancel wins over a preemption under way
        if stopped:
            # Read back by a poll that finds the run still PENDING (STOPPED_WAITING); a
            # cancel wins over a preemption, as above.
            before = self.marks.read(sid) or {"submitted": True}
            if before.get("stop") != StopKind.CANCEL.value:
                self.marks.write(sid, {**before, "stop": kind.value})
        return stopped

    def release(self, handle: Handle) -> bool:
        sid = run_name(self.context.pool_id, handle)
        self.marks.forget(sid)
        self._preempting.discard(handle)
        return True

    def logs(
        self,
        handle: Handle,
        offset: int,
        limit: int,
        rank: int | None = None,
        stderr: bool = False,
    ) -> LogChunk:
        """Every attempt's output, in order (Ray keeps stdout and stderr together); with
        `rank`, only a gang's lines of that rank (`[rank K] ` in them)."""
        try:
            client = self._connect()
        except _HEAD_ERRORS:
            return LogChunk(b"", offset, None)
        text = ""
        for attempt in range(handle.attempt + 1):
            sid = run_name(self.context.pool_id, Handle(handle.job_id, attempt))
            try:
                text += client.get_job_logs(sid)
            except _HEAD_ERRORS:
                continue
        if rank is not None:
            tag = f"[rank {rank}] "
            text = "".join(line for line in text.splitlines(keepends=True) if tag in line)
        data = text.encode("utf-8", errors="replace")
        chunk = data[offset : offset + max(limit, 0)]
        return LogChunk(chunk, offset + len(chunk), len(data))

    def log_location(self, job_id: int) -> str:
        stem = run_name(self.context.pool_id, Handle(job_id, 0))[: -len("-0")]
        return f"ray job logs {stem}-ATTEMPT --address {self.settings.address}"

    def health(self) -> BackendHealth:
        url = f"{self.settings.address}/api/version"
        try:
            answer = requests.get(url, timeout=self.settings.request_timeout_s)
            answer.raise_for_status()
            version = answer.json()
        except (requests.RequestException, ValueError) as exc:
            return BackendHealth(False, f"the Ray head at {self.settings.address}: {exc}"[:500])
        if not isinstance(version, dict):
            return BackendHealth(False, f"{url} answered no version")
        ray_version, session = version.get("ray_version"), version.get("session_name")
        return BackendHealth(True, f"Ray {ray_version} at {self.settings.address} ({session})")

    def capacity(self) -> Capacity:
        """The cluster's GPU nodes (capacity.py): the state API's node list and its live
        actors (what each node holds), each with the settings' deadline; the head's words
        when either cannot be read (nodes shown free while they are not would be admitted
        to)."""
        timeout = self.settings.request_timeout_s
        answers: list[object] = []
        try:
            for endpoint in (NODES_ENDPOINT, ACTORS_ENDPOINT):
                answer = requests.get(f"{self.settings.address}{endpoint}", timeout=timeout)
                answer.raise_for_status()
                answers.append(answer.json())
        except (requests.RequestException, ValueError) as exc:
            return Capacity(problem=summary_line(f"the Ray head at {self.settings.address}: {exc}"))
        listed, actors = answers
        return Capacity(nodes=engine_nodes(listed, gpus_in_use(actors)))
