"""The job spec's two forms as tables of fields, and the JobSpec each builds.

One table for what users type (files, flags, the SDK's Job: units as text, priority by
name), one for the HTTP API's wire form (wire.py: plain numbers in bytes and seconds). A row
names its key, the rule from rules.py that checks it and its default (fields.py says how the
rows are read); a field is added here, once per form, and in core.job.JobSpec. Rules across
fields (GPU shares, a gang's GPUs) are `_resource_errors`.

Standard library only: `gpupool submit` builds a spec on every call (fields.py says why
pydantic no longer runs these).
"""

from __future__ import annotations

import functools
import os
import time as _time
from collections.abc import Mapping

from gpupool.core.job_enums import DEFAULT_PRIORITY, Hold
from gpupool.spec.control_rules import (
    check_after,
    check_array,
    check_retries,
    check_retry_on_exit,
)
from gpupool.spec.declared_use import exported_declarations
from gpupool.spec.errors import FieldError, SpecError, unknown_key_message
from gpupool.spec.fields import Field, check_fields, names
from gpupool.spec.rules import (
    DEFAULT_GRACE_S,
    MAX_GRACE_S,
    MAX_TIME_S,
    check_arg,
    check_backend,
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
    check_nodes,
    check_preemptible,
    check_priority,
    check_project,
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
from gpupool.spec.signal_rule import check_signal

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from gpupool.core.job import JobSpec
    from gpupool.core.json_types import JsonObject


def _command(name: str = "command", allow_string: bool = True) -> Field:
    def rule(value: Any) -> list[Any]:
        return split_command(value, allow_string=allow_string)

    return Field(name, rule, required=True, each=check_arg, label="argv")


def _env(name: str = "env") -> Field:
    return Field(name, check_env_mapping, {}, keys=check_env_name, values=check_env_value)


# What a user writes: a spec file's keys, and the flags of the same names (gpu_type:
# --gpu-type). The order is the order errors are listed in.
USER_FIELDS: tuple[Field, ...] = (
    Field("name", check_name, ""),
    _command(),
    # A whole number, or a fraction of one GPU (0.5: half its memory, shared).
    Field("gpus", check_gpus, 0),
    Field("gpu_type", check_gpu_type),
    Field("gpu_memory", check_mem),  # on one shared GPU
    Field("cpus", check_cpus),
    Field("mem", check_mem),
    Field("time", check_time),
    Field("begin", check_begin, reads_clock=True),  # relative to build_spec's `now`
    Field("project", check_project, "default"),
    Field("priority", check_priority, DEFAULT_PRIORITY),
    Field("preemptible", check_preemptible),
    _env(),
    Field("workdir", check_workdir),
    Field("grace", check_grace, DEFAULT_GRACE_S),
    Field("signal", check_signal),  # USR1@120 before the time limit; none; None: the default
    Field("retry", check_retries, 0),
    Field("retry_on_exit", check_retry_on_exit, ()),
    Field("after", check_after, ()),
    Field("array", check_array),
    Field("distributed", check_distributed),
    Field("hold", check_preemptible),  # true or false, as preemptible
    Field("image", check_image),
    Field("container_engine", check_container_engine),
    Field("separate_stderr", check_preemptible),  # true or false
    Field("backend", check_backend),  # None: the project's default (docs/backends.md)
    Field("nodes", check_nodes, 1),  # `gpus`, `cpus` and `mem` are per node
)
SPEC_KEYS: tuple[str, ...] = names(USER_FIELDS)

# The HTTP API's form (see wire.py): plain numbers in bytes and seconds.
WIRE_FIELDS: tuple[Field, ...] = (
    _command(allow_string=False),
    Field("name", check_name, ""),
    Field("project", check_project, "default"),
    Field("priority", check_priority, DEFAULT_PRIORITY),
    Field("gpus", wire_gpus, 0),
    Field("gpu_type", check_gpu_type),
    Field("gpu_memory_bytes", wire_mem),
    Field("gpu_fraction", wire_fraction),
    Field("cpus", check_cpus),
    Field("mem_bytes", wire_mem),
    Field("time_limit_s", lambda v: seconds_or_none(v, MAX_TIME_S)),
    _env(),
    Field("base_env", clean_base_env, ()),
    Field("workdir", wire_workdir, ""),
    Field("umask", check_umask),
    Field("grace_s", lambda v: seconds(v, MAX_GRACE_S), DEFAULT_GRACE_S),
    Field("warning_signal", check_signal),  # "USR1@120" or "none", as a user writes it
    Field("begin_time", wire_begin),
    Field("preemptible", check_preemptible),
    Field("retries", check_retries, 0),
    Field("retry_on_exit", check_retry_on_exit, ()),
    Field("after", check_after, ()),  # ["12:ok", "13:any"]
    Field("array", check_array),  # "0-99%8"
    Field("distributed", check_distributed),
    # Submitted held by its owner (`submit --hold`); an admin's hold is never submitted.
    Field("hold", check_preemptible),
    Field("image", check_image),
    Field("container_engine", check_container_engine),
    Field("separate_stderr", check_preemptible),
    Field("backend", check_backend),
    Field("nodes", check_nodes, 1),
)
WIRE_KEYS: tuple[str, ...] = names(WIRE_FIELDS)


@functools.cache
def _keys_of(fields: tuple[Field, ...]) -> tuple[tuple[str, ...], frozenset[str]]:
    """The keys of `fields` (the module's constant tuples), in order and as a set: made once
    each, not for every spec a batch reads."""
    keys = names(fields)
    return keys, frozenset(keys)


def _validate(
    fields: tuple[Field, ...], data: Any, lines: Mapping[str, int], now: float = 0.0
) -> tuple[dict[str, Any] | None, list[FieldError]]:
    """Every field's value by name (None when any is invalid) and every error, each mapped to
    its field and, through `lines`, to its line."""
    if not isinstance(data, Mapping):
        return None, [FieldError("", f"a job spec must be a mapping, got {got(data)}")]
    keys, key_set = _keys_of(fields)
    errors: list[FieldError] = []
    known: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(key, str) and key in key_set:
            known[key] = value
        else:  # named here, to suggest the key that was meant
            errors.append(FieldError(str(key), unknown_key_message(key, keys), lines.get(str(key))))
    values, problems = check_fields(fields, known, now)
    # No fallback from "env.X" to the line of "env:": an entry with no line of its own came
    # from a flag, not from the file.
    errors.extend(FieldError(f, m, lines.get(f)) for f, m in problems)
    if not problems:
        cross = _resource_errors(values, user_form=fields is USER_FIELDS)  # else WIRE_FIELDS
        errors.extend(FieldError(f, m, lines.get(f)) for f, m in cross)
    return (None if errors else values), errors


def _resource_errors(v: Mapping[str, Any], user_form: bool) -> list[tuple[str, str]]:
    """Rules across the GPU fields of either form: (field, message) for each broken one."""
    errors: list[tuple[str, str]] = []
    gpus = v["gpus"]
    if user_form:
        memory_field, memory = "gpu_memory", v["gpu_memory"]
        fraction = gpus if isinstance(gpus, float) else None
        whole = 0 if fraction is not None else gpus
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
        memory, fraction = v["gpu_memory_bytes"], v["gpu_fraction"]
        fractional = memory is not None or fraction is not None
        if memory is not None and fraction is not None:
            errors.append(("gpu_memory_bytes", "cannot be combined with gpu_fraction"))
        elif fractional and gpus != 1:
            field = "gpu_fraction" if memory is None else "gpu_memory_bytes"
            errors.append((field, f"shares one GPU: needs gpus of 1, got {gpus}"))
    if v["distributed"] is not None and (fractional or gpus < 1):
        # One rank per GPU: the gang's size is its count of whole GPUs.
        what = "a share of one GPU" if fractional else f"gpus {gpus:g}"
        errors.append(("distributed", f"needs 1 or more whole GPUs (one rank each), got {what}"))
    errors.extend(_container_errors(v))
    if v["separate_stderr"] and v["distributed"] is not None:
        # Each rank's log holds its stdout and stderr together (rank_launcher.py).
        message = "cannot be combined with distributed: each rank's log holds both streams"
        errors.append(("separate_stderr", message))
    if v["nodes"] > 1 and fractional:
        # A share of one GPU is one process on one GPU: a gang over nodes holds GPUs whole.
        errors.append(("nodes", "cannot be combined with a share of one GPU"))
    if v["gpu_type"] is not None and gpus == 0 and not fractional:
        # A type with no count is almost always a forgotten `gpus:`: the job would run
        # with no GPU at all.
        message = "needs gpus of 1 or more (a GPU type was given, but no GPUs asked for)"
        errors.append(("gpu_type", message))
    return errors


def _container_errors(v: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Rules across the container fields of either form (docs/containers.md)."""
    errors: list[tuple[str, str]] = []
    if v["container_engine"] is not None and v["image"] is None:
        errors.append(("container_engine", "needs an image to run (image: or --image)"))
    if v["image"] is not None and v["distributed"] is not None:
        # The gang launcher is gpupool's own process on the host: it cannot start ranks
        # inside an image. torchrun inside the image does the same job.
        errors.append(
            (
                "image",
                f"cannot be combined with distributed: {v['distributed'].value}; run "
                "torchrun --standalone --nproc-per-node N inside the image instead "
                "(docs/containers.md)",
            )
        )
    return errors


def _user_resources(v: Mapping[str, Any]) -> dict[str, Any]:
    """core.job.Resources' fields, by name."""
    gpus, fraction = v["gpus"], None
    if isinstance(gpus, float):  # check_gpus lets only 0 < x < 1 through as a float
        gpus, fraction = 1, gpus
    if v["gpu_memory"] is not None:
        gpus = 1
    return {
        "gpus": int(gpus),
        "gpu_type": v["gpu_type"],
        "cpus": v["cpus"],
        "mem_bytes": v["mem"],
        "gpu_memory_bytes": v["gpu_memory"],
        "gpu_fraction": fraction,
    }


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
    from gpupool.core.job import JobSpec, Resources

    spec, resources = _user_spec(data, lines, source, base_env, default_workdir, umask, now)
    return JobSpec(resources=Resources(**resources), **spec)


def build_wire(
    data: Mapping[str, Any],
    *,
    lines: Mapping[str, int] | None = None,
    source: str | None = None,
    base_env: Mapping[str, str] | None = None,
    default_workdir: str = "",
    umask: int | None = None,
    now: float | None = None,
) -> JsonObject:
    """See gpupool.spec.build_wire."""
    from gpupool.spec.wire import wire_of

    return wire_of(*_user_spec(data, lines, source, base_env, default_workdir, umask, now))


def _user_spec(
    data: Mapping[str, Any],
    lines: Mapping[str, int] | None,
    source: str | None,
    base_env: Mapping[str, str] | None,
    default_workdir: str,
    umask: int | None,
    now: float | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields of the core.job.JobSpec (but its `resources`) and of the Resources that
    a user's spec asks for, by name: what build_spec makes its JobSpec of, and build_wire
    its wire form (the CLI's path, which then needs no dataclass: core/values.py). A
    SpecError naming every bad field."""
    if default_workdir and not os.path.isabs(default_workdir):
        raise ValueError(f"default_workdir must be absolute, got {default_workdir!r}")
    lines = lines or {}
    now = _time.time() if now is None else now
    m, errors = _validate(USER_FIELDS, data, lines, now)
    try:
        base = clean_base_env(base_env)
    except ValueError as e:
        errors.append(FieldError("base_env", str(e)))
    # GPUPOOL_SIMULATED_* exported: the job's declaration, as with --env (declared_use.py).
    exported, bad = exported_declarations(base_env, m["env"] if m is not None else {})
    errors.extend(bad)
    if m is None or errors:
        _raise(errors, source)
    spec = {
        "command": m["command"],
        "name": m["name"],
        "project": m["project"],
        "priority": m["priority"],
        "time_limit_s": m["time"],
        "env": tuple(sorted({**exported, **m["env"]}.items())),
        "base_env": base,
        "workdir": m["workdir"] if m["workdir"] is not None else default_workdir,
        "umask": umask,
        "grace_s": m["grace"],
        "begin_time": m["begin"],
        "preemptible": m["preemptible"],
        "retries": m["retry"],
        "retry_on_exit": m["retry_on_exit"],
        "after": m["after"],
        "array": m["array"],
        "distributed": m["distributed"],
        "hold": Hold.USER if m["hold"] else None,
        "image": m["image"],
        "container_engine": m["container_engine"],
        "separate_stderr": bool(m["separate_stderr"]),
        "backend": m["backend"],
        "nodes": m["nodes"],
        "warning_signal": m["signal"],
    }
    return spec, _user_resources(m)


def spec_from_wire(d: Mapping[str, Any]) -> JobSpec:
    """See gpupool.spec.spec_from_wire."""
    from gpupool.core.job import JobSpec, Resources

    m, errors = _validate(WIRE_FIELDS, d, {})
    if m is None or errors:
        _raise(errors, None)
    return JobSpec(
        command=m["command"],
        resources=Resources(
            gpus=m["gpus"],
            gpu_type=m["gpu_type"],
            cpus=m["cpus"],
            mem_bytes=m["mem_bytes"],
            gpu_memory_bytes=m["gpu_memory_bytes"],
            gpu_fraction=m["gpu_fraction"],
        ),
        name=m["name"],
        project=m["project"],
        priority=m["priority"],
        time_limit_s=m["time_limit_s"],
        env=tuple(sorted(m["env"].items())),
        base_env=m["base_env"],
        workdir=m["workdir"],
        umask=m["umask"],
        grace_s=m["grace_s"],
        begin_time=m["begin_time"],
        preemptible=m["preemptible"],
        retries=m["retries"],
        retry_on_exit=m["retry_on_exit"],
        after=m["after"],
        array=m["array"],
        distributed=m["distributed"],
        hold=Hold.USER if m["hold"] else None,
        image=m["image"],
        container_engine=m["container_engine"],
        separate_stderr=bool(m["separate_stderr"]),
        backend=m["backend"],
        nodes=m["nodes"],
        warning_signal=m["warning_signal"],
    )
