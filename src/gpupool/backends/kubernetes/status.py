"""Job and pod JSON, as the API server lists them, into Observations: pure (docs/kubernetes.md,
"States").

- Not suspended, some pod active (pending or running) -> RUNNING.
- Suspended (Kueue has not admitted it, or evicted it) -> QUEUED, the Suspended condition's
  words as its detail; admitted but no pod yet -> QUEUED ("admitted, pods being created").
- Condition Complete -> EXITED 0. Condition Failed with reason DeadlineExceeded (its
  activeDeadlineSeconds, the time limit) -> EXITED as TIMEOUT; any other Failed -> EXITED
  with the main container's exit code from the pods (the pod that failed first), when the
  pods still say; else 1, the message saying the code is not known.
- Gone (not listed) after a stop gpupool asked for or saw under way -> EXITED CANCELLED (or
  PREEMPTED); gone otherwise -> UNLAUNCHED (never created: launching it again is safe).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from gpupool.backends.kubernetes.render import CONTAINER, INDEX_ANNOTATION, LABEL_RUN
from gpupool.core.execution import ExitReason, ExitRecord, Observation, RunState, StopKind
from gpupool.core.json_types import JsonObject, JsonValue

SIGTERM_EXIT = 128 + signal.SIGTERM  # a run stopped by its stop: SIGTERM, as a shell says


@dataclass(frozen=True)
class PodExit:
    """The main container's end in one pod of a run."""

    index: int
    exit_code: int
    signal: int | None
    reason: str  # the kubelet's word: Error, OOMKilled, ...
    finished: str  # RFC 3339, as the API says it ("" when not said): the first to fail first


def _obj(value: JsonValue | None) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _list(value: JsonValue | None) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def _str(value: JsonValue | None) -> str:
    return value if isinstance(value, str) else ""


def _int(value: JsonValue | None) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _time(value: JsonValue | None, default: float) -> float:
    """An RFC 3339 time of the API (`2024-05-01T10:00:00Z`) as a Unix time."""
    text = _str(value)
    if not text:
        return default
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default


def items_by_name(listing: JsonObject, label: str = LABEL_RUN) -> dict[str, JsonObject]:
    """A List's items by the value of `label` (a Job list: one item per run)."""
    out: dict[str, JsonObject] = {}
    for item in _list(listing.get("items")):
        obj = _obj(item)
        name = _str(_obj(_obj(obj.get("metadata")).get("labels")).get(label))
        if name:
            out[name] = obj
    return out


def condition(job: JsonObject, kind: str) -> JsonObject | None:
    """The job's condition of type `kind` when it is True."""
    for entry in _list(_obj(job.get("status")).get("conditions")):
        cond = _obj(entry)
        if _str(cond.get("type")) == kind and _str(cond.get("status")) == "True":
            return cond
    return None


def failed_runs(jobs: Mapping[str, JsonObject]) -> list[str]:
    """The runs whose exit codes only their pods know (Failed, not by the time limit)."""
    out = []
    for name, job in jobs.items():
        failed = condition(job, "Failed")
        if failed is not None and _str(failed.get("reason")) != "DeadlineExceeded":
            out.append(name)
    return out


def pod_exits(pod_list: JsonObject) -> dict[str, list[PodExit]]:
    """Each run's ended main containers, by run name: failed ones first, earliest first."""
    out: dict[str, list[PodExit]] = {}
    for item in _list(pod_list.get("items")):
        pod = _obj(item)
        meta = _obj(pod.get("metadata"))
        run = _str(_obj(meta.get("labels")).get(LABEL_RUN))
        index_text = _str(_obj(meta.get("annotations")).get(INDEX_ANNOTATION))
        index = int(index_text) if index_text.isdigit() else 0
        for entry in _list(_obj(pod.get("status")).get("containerStatuses")):
            status = _obj(entry)
            if _str(status.get("name")) != CONTAINER:
                continue
            ended = _obj(_obj(status.get("state")).get("terminated"))
            if not ended:
                continue
            code = _int(ended.get("exitCode"))
            # A container killed by a signal says 128+N (137: SIGKILL, the OOM killer's).
            sig = _int(ended.get("signal")) or (code - 128 if 128 < code < 160 else None)
            reason = _str(ended.get("reason"))
            finished = _str(ended.get("finishedAt")) or "~"  # unknown: after any known
            out.setdefault(run, []).append(PodExit(index, code, sig, reason, finished))
    for exits in out.values():
        # The pod that failed first is the cause; the gang's others were stopped after it.
        exits.sort(key=lambda e: (e.exit_code == 0, e.finished, e.index))
    return out


def observe(
    job: JsonObject | None,
    ref: str,
    stop: StopKind | None,
    exits: Sequence[PodExit],
    now: float,
) -> Observation:
    """One run's Observation (module docstring). `job`: its listed Job (None: not listed);
    `stop`: the stop gpupool asked for or saw under way; `exits`: its pods' ends when listed."""
    if job is None:
        if stop is None:
            return Observation(RunState.UNLAUNCHED, ref=ref)
        reason = stop.exit_reason
        record = ExitRecord(SIGTERM_EXIT, signal.SIGTERM, reason, now, now, "Job deleted")
        return Observation(RunState.EXITED, exit=record, ref=ref)
    status = _obj(job.get("status"))
    started = _time(status.get("startTime"), now)
    if condition(job, "Complete") is not None:
        ended = _time(status.get("completionTime"), now)
        record = ExitRecord(0, None, ExitReason.EXITED, started, ended, "Complete")
        return Observation(RunState.EXITED, exit=record, ref=ref)
    failed = condition(job, "Failed")
    if failed is not None:
        return Observation(RunState.EXITED, exit=_failure(failed, exits, started, now), ref=ref)
    if _obj(job.get("metadata")).get("deletionTimestamp") is not None:
        return Observation(RunState.RUNNING, ref=ref, detail="being deleted")
    if _obj(job.get("spec")).get("suspend") is True:
        return Observation(RunState.QUEUED, ref=ref, detail=_suspended_text(job))
    if _int(status.get("active")) > 0:
        ready = _int(status.get("ready"))
        return Observation(RunState.RUNNING, ref=ref, detail=f"{ready} pod(s) ready")
    return Observation(RunState.QUEUED, ref=ref, detail="admitted by Kueue, pods being created")


def _suspended_text(job: JsonObject) -> str:
    queue = _str(_obj(_obj(job.get("metadata")).get("labels")).get("kueue.x-k8s.io/queue-name"))
    cond = condition(job, "Suspended")
    said = _str(cond.get("message")) if cond is not None else ""
    waiting = f"waiting for Kueue to admit it (LocalQueue {queue})"
    return f"{waiting}: {said}" if said else waiting


def _failure(
    failed: JsonObject, exits: Sequence[PodExit], started: float, now: float
) -> ExitRecord:
    ended = _time(failed.get("lastTransitionTime"), now)
    reason, message = _str(failed.get("reason")), _str(failed.get("message"))
    words = f"{reason}: {message}" if message else reason or "Failed"
    if reason == "DeadlineExceeded":
        return ExitRecord(SIGTERM_EXIT, signal.SIGTERM, ExitReason.TIMEOUT, started, ended, words)
    if exits:
        first = exits[0]
        said = f"{words}; pod {first.index}: {first.reason or 'exited'} (exit {first.exit_code})"
        return ExitRecord(first.exit_code, first.signal, ExitReason.EXITED, started, ended, said)
    return ExitRecord(1, None, ExitReason.EXITED, started, ended, f"{words} (exit code not known)")
