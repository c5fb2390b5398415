"""Stored forms <-> core objects: JobSpec as a JSON-ready dict (exact both ways), rows as Jobs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from gpupool.core.cgroup_usage import CgroupUsage
from gpupool.core.containers import ContainerEngine
from gpupool.core.job import Distributed, Hold, Job, JobSpec, Resources, Transition
from gpupool.core.job_control import AfterKind, ArrayTask, Dependency
from gpupool.core.warning_signal import WarningSignal

if TYPE_CHECKING:
    from gpupool.store.models import JobRow

# Bumped if the layout of the dict changes in a way old readers cannot take; stored in each row
# so a later migration can tell old rows from new ones.
FORMAT = 1

_SPEC_KEYS = frozenset(f.name for f in fields(JobSpec))
_RESOURCE_KEYS = frozenset(f.name for f in fields(Resources))


def encode_spec(spec: JobSpec) -> dict[str, object]:
    r = spec.resources
    stored: dict[str, object] = {
        "format": FORMAT,
        "command": list(spec.command),
        "resources": {
            "gpus": r.gpus,
            "gpu_type": r.gpu_type,
            "cpus": r.cpus,
            "mem_bytes": r.mem_bytes,
            "gpu_memory_bytes": r.gpu_memory_bytes,
            "gpu_fraction": r.gpu_fraction,
        },
        "name": spec.name,
        "project": spec.project,
        "priority": spec.priority,
        "time_limit_s": spec.time_limit_s,
        # Lists of pairs, not objects: they keep the order and any repeated name, so the
        # tuple-of-pairs fields come back exactly as they went in.
        "env": [[k, v] for k, v in spec.env],
        "base_env": _stored_environment(spec.base_env),
        "workdir": spec.workdir,
        "umask": spec.umask,
        "grace_s": spec.grace_s,
        "begin_time": spec.begin_time,
        "preemptible": spec.preemptible,
        "distributed": None if spec.distributed is None else spec.distributed.value,
    }
    # Only when set (older rows have none of them; decode_spec takes the defaults). An
    # array submission is stored as its tasks (`array_task`), never as `array`.
    if spec.retries:
        stored["retries"] = spec.retries
    if spec.retry_on_exit:
        stored["retry_on_exit"] = list(spec.retry_on_exit)
    if spec.after:
        stored["after"] = [[d.job_id, d.kind.value] for d in spec.after]
    if spec.image is not None:
        stored["image"] = spec.image
    if spec.container_engine is not None:
        stored["container_engine"] = spec.container_engine.value
    if spec.array_task is not None:
        task = spec.array_task
        stored["array_task"] = {"index": task.index, "limit": task.limit}
    if spec.hold is not None:
        stored["hold"] = spec.hold.value
    if spec.separate_stderr:
        stored["separate_stderr"] = True
    if spec.backend is not None:
        stored["backend"] = spec.backend
    if spec.route_to:
        stored["route_to"] = list(spec.route_to)
    if spec.nodes != 1:
        stored["nodes"] = spec.nodes
    if spec.warning_signal is not None:  # --signal (its number: this machine's, as its runs')
        warning = spec.warning_signal
        stored["warning_signal"] = {"signum": warning.signum, "before_s": warning.before_s}
    return stored


_last_environment: list[tuple[tuple[tuple[str, str], ...], list[list[str]]]] = []


def _stored_environment(pairs: tuple[tuple[str, str], ...]) -> list[list[str]]:
    """The submitter's environment as stored: [[name, value], ...]. The last one made is
    given again for the same tuple: a batch's jobs share one (spec/rules.py's
    clean_base_env), ~40 pairs that each job's encoding built anew before. The list is
    shared: it is only ever serialized, never changed."""
    known = _last_environment[0] if _last_environment else None
    if known is not None and known[0] is pairs:
        return known[1]
    stored = [[k, v] for k, v in pairs]
    _last_environment[:] = [(pairs, stored)]
    return stored


def decode_spec(data: Mapping[str, Any]) -> JobSpec:
    """The JobSpec from `encode_spec`'s output; keys missing (older rows) take the defaults."""
    data = dict(data)
    fmt = data.pop("format", FORMAT)
    if fmt != FORMAT:
        raise ValueError(f"job spec format {fmt!r} is not supported (expected {FORMAT})")
    unknown = set(data) - _SPEC_KEYS
    if unknown:
        # Refuse rather than drop: silently losing part of a stored request is worse.
        raise ValueError(f"unknown job spec fields: {', '.join(sorted(unknown))}")
    kwargs: dict[str, Any] = dict(data)
    if "command" in data:
        kwargs["command"] = tuple(data["command"])
    if "resources" in data:
        kwargs["resources"] = _decode_resources(data["resources"])
    if data.get("distributed") is not None:
        kwargs["distributed"] = Distributed(data["distributed"])
    if data.get("container_engine") is not None:
        kwargs["container_engine"] = ContainerEngine(data["container_engine"])
    for key in ("env", "base_env"):
        if key in data:
            kwargs[key] = tuple(_pair(p, key) for p in data[key])
    if "retry_on_exit" in data:
        kwargs["retry_on_exit"] = tuple(data["retry_on_exit"])
    if "after" in data:
        kwargs["after"] = tuple(Dependency(int(i), AfterKind(k)) for i, k in data["after"])
    if data.get("array_task") is not None:
        task = data["array_task"]
        kwargs["array_task"] = ArrayTask(int(task["index"]), task.get("limit"))
    if data.get("hold") is not None:
        kwargs["hold"] = Hold(data["hold"])
    if data.get("separate_stderr"):
        kwargs["separate_stderr"] = True
    if data.get("backend") is not None:
        kwargs["backend"] = str(data["backend"])
    if data.get("route_to"):
        kwargs["route_to"] = tuple(str(b) for b in data["route_to"])
    if data.get("nodes") is not None:
        kwargs["nodes"] = int(data["nodes"])
    if data.get("warning_signal") is not None:
        warning = data["warning_signal"]
        kwargs["warning_signal"] = WarningSignal(int(warning["signum"]), float(warning["before_s"]))
    if data.get("array") is not None:
        raise ValueError("an array submission is stored as its tasks, not as `array`")
    return JobSpec(**kwargs)


def _decode_resources(data: Mapping[str, Any]) -> Resources:
    unknown = set(data) - _RESOURCE_KEYS
    if unknown:
        raise ValueError(f"unknown resource fields: {', '.join(sorted(unknown))}")
    return Resources(**data)


def _pair(item: Any, key: str) -> tuple[str, str]:
    if not isinstance(item, (list, tuple)) or len(item) != 2:
        raise ValueError(f"{key}: expected [name, value] pairs, got {item!r}")
    return (item[0], item[1])


def job_from_row(row: JobRow, events: Iterable[Transition] = (), environment: bool = True) -> Job:
    """The Job of `row`; without the submitter's environment (`JobSpec.base_env`) when
    `environment` is False."""
    spec = row.spec if environment else {k: v for k, v in row.spec.items() if k != "base_env"}
    return Job(
        id=row.id,
        spec=decode_spec(spec),
        user=row.user,
        state=row.state,
        submit_time=row.submit_time,
        start_time=row.start_time,
        end_time=row.end_time,
        exit_code=row.exit_code,
        reason=row.reason,
        node=row.node,
        gpus=tuple(row.gpus or ()),
        gpu_memory_bytes=row.gpu_memory_bytes,
        restart_count=row.restart_count,
        failed_attempts=row.failed_attempts,
        cancel_requested=row.cancel_requested,
        version=row.version,
        array_id=row.array_id,
        backend_ref=row.backend_ref,
        cgroup_usage=cgroup_usage_of(row),
        events=tuple(events),
    )


def cgroup_usage_of(row: JobRow) -> CgroupUsage | None:
    """The figures its runs' cgroups counted, as the row keeps them (None: none counted)."""
    counted = (row.cpu_seconds, row.memory_peak_bytes, row.memory_mean_bytes)
    if row.cpu_seconds_all_runs is None and all(v is None for v in counted):
        return None
    return CgroupUsage(
        cpu_seconds=row.cpu_seconds,
        memory_peak_bytes=row.memory_peak_bytes,
        memory_mean_bytes=row.memory_mean_bytes,
        memory_limit_bytes=row.memory_limit_bytes,
        cpu_seconds_all_runs=row.cpu_seconds_all_runs,
    )
