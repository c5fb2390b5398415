"""The job spec as pydantic models: one for what users type (files, flags), one for the
HTTP API's wire form. Both produce core.job.JobSpec.

Every field is run through its rule from rules.py as a "before" validator; pydantic's part
is to run them all and collect every error with its location. Only this module imports
pydantic, and gpupool.spec imports it lazily so that the CLI starts fast.
"""

from __future__ import annotations

import os
import time as _time
from collections.abc import Mapping
from typing import Annotated, Any, NoReturn

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo

from gpupool.core.containers import ContainerEngine
from gpupool.core.job import DEFAULT_PRIORITY, Distributed, Hold, JobSpec, Resources
from gpupool.core.job_control import ArrayRequest, Dependency
from gpupool.spec.errors import FieldError, SpecError, unknown_key_message
from gpupool.spec.flags import SPEC_KEYS
from gpupool.spec.rules import (
    DEFAULT_GRACE_S,
    MAX_GRACE_S,
    MAX_TIME_S,
    check_after,
    check_arg,
    check_array,
    check_begin,
    check_container_engine,
    check_cpus,
    check_distributed,
    check_env_mapping,
    check_env_name,
    check_env_value,
    check_gpu_type,
    check_gpus,
    check_grace,
    check_image,
    check_mem,
    check_name,
    check_preemptible,
    check_priority,
    check_project,
    check_retries,
    check_retry_on_exit,
    check_time,
    check_umask,
    check_workdir,
    clean_base_env,
    got,
    seconds,
    seconds_or_none,
    split_command,
    wire_begin,
    wire_fraction,
    wire_gpus,
    wire_mem,
    wire_workdir,
)


def _v(fn: Any) -> BeforeValidator:
    return BeforeValidator(fn)


EnvName = Annotated[str, _v(check_env_name)]
EnvValue = Annotated[str, _v(check_env_value)]
Env = Annotated[dict[EnvName, EnvValue], _v(check_env_mapping)]
Arg = Annotated[str, _v(check_arg)]


def _begin(value: Any, info: ValidationInfo) -> float | None:
    # "now" comes from build_spec through the validation context, so tests can fix it.
    context = info.context or {}
    return check_begin(value, context.get("now", _time.time()))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpecModel(_Strict):
    """What a user writes: a spec file and/or flags (units as text, priority by name)."""

    name: Annotated[str, _v(check_name)] = ""
    command: Annotated[tuple[Arg, ...], _v(split_command)]
    # A whole number, or a fraction of one GPU (0.5: half its memory, shared).
    gpus: Annotated[int | float, _v(check_gpus)] = 0
    gpu_type: Annotated[str | None, _v(check_gpu_type)] = None
    gpu_memory: Annotated[int | None, _v(check_mem)] = None  # on one shared GPU
    cpus: Annotated[int | None, _v(check_cpus)] = None
    mem: Annotated[int | None, _v(check_mem)] = None
    time: Annotated[float | None, _v(check_time)] = None
    begin: Annotated[float | None, _v(_begin)] = None
    project: Annotated[str, _v(check_project)] = "default"
    priority: Annotated[int, _v(check_priority)] = DEFAULT_PRIORITY
    preemptible: Annotated[bool | None, _v(check_preemptible)] = None
    env: Env = {}
    workdir: Annotated[str | None, _v(check_workdir)] = None
    grace: Annotated[float, _v(check_grace)] = DEFAULT_GRACE_S
    retry: Annotated[int, _v(check_retries)] = 0
    retry_on_exit: Annotated[tuple[int, ...], _v(check_retry_on_exit)] = ()
    after: Annotated[tuple[Dependency, ...], _v(check_after)] = ()
    array: Annotated[ArrayRequest | None, _v(check_array)] = None
    distributed: Annotated[Distributed | None, _v(check_distributed)] = None
    hold: Annotated[bool | None, _v(check_preemptible)] = None  # true or false, as preemptible
    image: Annotated[str | None, _v(check_image)] = None
    container_engine: Annotated[ContainerEngine | None, _v(check_container_engine)] = None


class WireModel(_Strict):
    """The HTTP API's form (see wire.py): plain numbers in bytes and seconds."""

    command: Annotated[tuple[Arg, ...], _v(lambda v: split_command(v, allow_string=False))]
    name: Annotated[str, _v(check_name)] = ""
    project: Annotated[str, _v(check_project)] = "default"
    priority: Annotated[int, _v(check_priority)] = DEFAULT_PRIORITY
    gpus: Annotated[int, _v(wire_gpus)] = 0
    gpu_type: Annotated[str | None, _v(check_gpu_type)] = None
    gpu_memory_bytes: Annotated[int | None, _v(wire_mem)] = None
    gpu_fraction: Annotated[float | None, _v(wire_fraction)] = None
    cpus: Annotated[int | None, _v(check_cpus)] = None
    mem_bytes: Annotated[int | None, _v(wire_mem)] = None
    time_limit_s: Annotated[float | None, _v(lambda v: seconds_or_none(v, MAX_TIME_S))] = None
    env: Env = {}
    base_env: Annotated[tuple[tuple[str, str], ...], _v(clean_base_env)] = ()
    workdir: Annotated[str, _v(wire_workdir)] = ""
    umask: Annotated[int | None, _v(check_umask)] = None
    grace_s: Annotated[float, _v(lambda v: seconds(v, MAX_GRACE_S))] = DEFAULT_GRACE_S
    begin_time: Annotated[float | None, _v(wire_begin)] = None
    preemptible: Annotated[bool | None, _v(check_preemptible)] = None
    retries: Annotated[int, _v(check_retries)] = 0
    retry_on_exit: Annotated[tuple[int, ...], _v(check_retry_on_exit)] = ()
    after: Annotated[tuple[Dependency, ...], _v(check_after)] = ()  # ["12:ok", "13:any"]
    array: Annotated[ArrayRequest | None, _v(check_array)] = None  # "0-99%8"
    distributed: Annotated[Distributed | None, _v(check_distributed)] = None
    # Submitted held by its owner (`submit --hold`); an admin's hold is never submitted.
    hold: Annotated[bool | None, _v(check_preemptible)] = None
    image: Annotated[str | None, _v(check_image)] = None
    container_engine: Annotated[ContainerEngine | None, _v(check_container_engine)] = None


if tuple(SpecModel.model_fields) != SPEC_KEYS:  # flags.py lists them without pydantic
    raise RuntimeError("gpupool.spec.flags.SPEC_KEYS is out of date")
WIRE_KEYS: tuple[str, ...] = tuple(WireModel.model_fields)


def _validate(
    model: type[_Strict],
    data: Any,
    keys: tuple[str, ...],
    lines: Mapping[str, int],
    context: dict[str, Any] | None = None,
) -> tuple[Any, list[FieldError]]:
    """The model instance (None when invalid) and every error, each mapped to its field."""
    if not isinstance(data, Mapping):
        return None, [FieldError("", f"a job spec must be a mapping, got {got(data)}")]
    errors: list[FieldError] = []
    known: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(key, str) and key in keys:
            known[key] = value
        else:  # checked here rather than by pydantic, to suggest the key that was meant
            errors.append(FieldError(str(key), unknown_key_message(key, keys), lines.get(str(key))))
    instance: Any = None
    try:
        instance = model.model_validate(known, context=context)
    except ValidationError as e:
        for err in e.errors(include_url=False):
            field, message = _field_and_message(err)
            # No fallback from "env.X" to the line of "env:": an entry with no line of its
            # own came from a flag, not from the file.
            errors.append(FieldError(field, message, lines.get(field)))
    if instance is not None:
        errors.extend(FieldError(f, m, lines.get(f)) for f, m in _resource_errors(instance))
    return (None if errors else instance), errors


def _resource_errors(m: Any) -> list[tuple[str, str]]:
    """Rules across the GPU fields of either model: (field, message) for each broken one."""
    errors: list[tuple[str, str]] = []
    if isinstance(m, SpecModel):
        memory_field, memory = "gpu_memory", m.gpu_memory
        fraction = m.gpus if isinstance(m.gpus, float) else None
        whole = 0 if fraction is not None else m.gpus
        if memory is not None and fraction is not None:
            msg = (
                f"cannot be combined with a fraction of a GPU (gpus {fraction:g}): give one of them"
            )
            errors.append((memory_field, msg))
        elif memory is not None and whole > 1:
            msg = f"shares one GPU: needs gpus of 1 or left out, got gpus {whole}"
            errors.append((memory_field, msg))
        fractional = memory is not None or fraction is not None
    else:
        fractional = m.gpu_memory_bytes is not None or m.gpu_fraction is not None
        if m.gpu_memory_bytes is not None and m.gpu_fraction is not None:
            errors.append(("gpu_memory_bytes", "cannot be combined with gpu_fraction"))
        elif fractional and m.gpus != 1:
            field = "gpu_fraction" if m.gpu_memory_bytes is None else "gpu_memory_bytes"
            errors.append((field, f"shares one GPU: needs gpus of 1, got {m.gpus}"))
    if m.distributed is not None and (fractional or m.gpus < 1):
        # One rank per GPU: the gang's size is its count of whole GPUs.
        what = "a share of one GPU" if fractional else f"gpus {m.gpus:g}"
        errors.append(("distributed", f"needs 1 or more whole GPUs (one rank each), got {what}"))
    errors.extend(_container_errors(m))
    if m.gpu_type is not None and m.gpus == 0 and not fractional:
        # A type with no count is almost always a forgotten `gpus:`: the job would run
        # with no GPU at all.
        message = "needs gpus of 1 or more (a GPU type was given, but no GPUs asked for)"
        errors.append(("gpu_type", message))
    return errors


def _container_errors(m: Any) -> list[tuple[str, str]]:
    """Rules across the container fields of either model (docs/containers.md)."""
    errors: list[tuple[str, str]] = []
    if m.container_engine is not None and m.image is None:
        errors.append(("container_engine", "needs an image to run (image: or --image)"))
    if m.image is not None and m.distributed is not None:
        # The gang launcher is gpupool's own process on the host: it cannot start ranks
        # inside an image. torchrun inside the image does the same job.
        errors.append(
            (
                "image",
                f"cannot be combined with distributed: {m.distributed.value}; run "
                "torchrun --standalone --nproc-per-node N inside the image instead "
                "(docs/containers.md)",
            )
        )
    return errors


def _user_resources(m: SpecModel) -> Resources:
    gpus, fraction = m.gpus, None
    if isinstance(gpus, float):  # check_gpus lets only 0 < x < 1 through as a float
        gpus, fraction = 1, gpus
    if m.gpu_memory is not None:
        gpus = 1
    return Resources(
        gpus=int(gpus),
        gpu_type=m.gpu_type,
        cpus=m.cpus,
        mem_bytes=m.mem,
        gpu_memory_bytes=m.gpu_memory,
        gpu_fraction=fraction,
    )


def _field_and_message(err: Any) -> tuple[str, str]:
    loc = err["loc"]
    if err["type"] == "value_error":
        message = str(err["ctx"]["error"])
    elif err["type"] == "missing":
        message = "is required"
    else:
        message = err["msg"]
    field = str(loc[0]) if loc else ""
    if len(loc) >= 2 and field in ("env", "base_env"):
        field = f"{field}.{loc[1]}"
    elif len(loc) >= 2 and field == "command":
        message = f"argv[{loc[1]}]: {message}"
    return field, message


def _raise(errors: list[FieldError], source: str | None) -> NoReturn:
    # File order reads best; errors without a line (flags, missing keys) go last.
    errors.sort(key=lambda e: (e.line is None, e.line or 0))
    raise SpecError(errors, source)


def build_spec(
    data: Mapping[str, Any],
    *,
    lines: Mapping[str, int] | None = None,
    source: str | None = None,
    base_env: Mapping[str, str] | None = None,
    default_workdir: str = "",
    umask: int | None = None,
    now: float | None = None,
) -> JobSpec:
    """See gpupool.spec.build_spec."""
    if default_workdir and not os.path.isabs(default_workdir):
        raise ValueError(f"default_workdir must be absolute, got {default_workdir!r}")
    lines = lines or {}
    now = _time.time() if now is None else now
    m, errors = _validate(SpecModel, data, SPEC_KEYS, lines, {"now": now})
    try:
        base = clean_base_env(base_env)
    except ValueError as e:
        errors.append(FieldError("base_env", str(e)))
    if m is None or errors:
        _raise(errors, source)
    return JobSpec(
        command=m.command,
        resources=_user_resources(m),
        name=m.name,
        project=m.project,
        priority=m.priority,
        time_limit_s=m.time,
        env=tuple(sorted(m.env.items())),
        base_env=base,
        workdir=m.workdir if m.workdir is not None else default_workdir,
        umask=umask,
        grace_s=m.grace,
        begin_time=m.begin,
        preemptible=m.preemptible,
        retries=m.retry,
        retry_on_exit=m.retry_on_exit,
        after=m.after,
        array=m.array,
        distributed=m.distributed,
        hold=Hold.USER if m.hold else None,
        image=m.image,
        container_engine=m.container_engine,
    )


def spec_from_wire(d: Mapping[str, Any]) -> JobSpec:
    """See gpupool.spec.spec_from_wire."""
    m, errors = _validate(WireModel, d, WIRE_KEYS, {})
    if m is None or errors:
        _raise(errors, None)
    return JobSpec(
        command=m.command,
        resources=Resources(
            gpus=m.gpus,
            gpu_type=m.gpu_type,
            cpus=m.cpus,
            mem_bytes=m.mem_bytes,
            gpu_memory_bytes=m.gpu_memory_bytes,
            gpu_fraction=m.gpu_fraction,
        ),
        name=m.name,
        project=m.project,
        priority=m.priority,
        time_limit_s=m.time_limit_s,
        env=tuple(sorted(m.env.items())),
        base_env=m.base_env,
        workdir=m.workdir,
        umask=m.umask,
        grace_s=m.grace_s,
        begin_time=m.begin_time,
        preemptible=m.preemptible,
        retries=m.retries,
        retry_on_exit=m.retry_on_exit,
        after=m.after,
        array=m.array,
        distributed=m.distributed,
        hold=Hold.USER if m.hold else None,
        image=m.image,
        container_engine=m.container_engine,
    )
