"""The job spec's pydantic models as they were until the CLI stopped importing pydantic
(gpupool.spec.model before the field tables), kept as the oracle for spec/fields.py:
tests/unit/test_spec_fields.py checks that the stdlib loop gives what these give.

Each field is its rule from rules.py as a "before" validator, as it was; pydantic runs them
all and collects every error with its location. `run` turns that into the loop's shape:
(values by field, [(field, message)]). A field added to the spec later needs no row here:
the agreement test draws its keys from these models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo

from gpupool.core.containers import ContainerEngine
from gpupool.core.job import DEFAULT_PRIORITY, Distributed
from gpupool.core.job_control import ArrayRequest, Dependency
from gpupool.core.warning_signal import WarningSignal
from gpupool.spec.control_rules import (
    check_after,
    check_array,
    check_retries,
    check_retry_on_exit,
)
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


def _v(fn: Any) -> BeforeValidator:
    return BeforeValidator(fn)


EnvName = Annotated[str, _v(check_env_name)]
EnvValue = Annotated[str, _v(check_env_value)]
Env = Annotated[dict[EnvName, EnvValue], _v(check_env_mapping)]
Arg = Annotated[str, _v(check_arg)]


def _begin(value: Any, info: ValidationInfo) -> float | None:
    context = info.context or {}
    return check_begin(value, context["now"])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpecModel(_Strict):
    name: Annotated[str, _v(check_name)] = ""
    command: Annotated[tuple[Arg, ...], _v(split_command)]
    gpus: Annotated[int | float, _v(check_gpus)] = 0
    gpu_type: Annotated[str | None, _v(check_gpu_type)] = None
    gpu_memory: Annotated[int | None, _v(check_mem)] = None
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
    signal: Annotated[WarningSignal | None, _v(check_signal)] = None
    retry: Annotated[int, _v(check_retries)] = 0
    retry_on_exit: Annotated[tuple[int, ...], _v(check_retry_on_exit)] = ()
    after: Annotated[tuple[Dependency, ...], _v(check_after)] = ()
    array: Annotated[ArrayRequest | None, _v(check_array)] = None
    distributed: Annotated[Distributed | None, _v(check_distributed)] = None
    hold: Annotated[bool | None, _v(check_preemptible)] = None
    image: Annotated[str | None, _v(check_image)] = None
    container_engine: Annotated[ContainerEngine | None, _v(check_container_engine)] = None
    separate_stderr: Annotated[bool | None, _v(check_preemptible)] = None
    backend: Annotated[str | None, _v(check_backend)] = None
    nodes: Annotated[int, _v(check_nodes)] = 1


class WireModel(_Strict):
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
    warning_signal: Annotated[WarningSignal | None, _v(check_signal)] = None
    begin_time: Annotated[float | None, _v(wire_begin)] = None
    preemptible: Annotated[bool | None, _v(check_preemptible)] = None
    retries: Annotated[int, _v(check_retries)] = 0
    retry_on_exit: Annotated[tuple[int, ...], _v(check_retry_on_exit)] = ()
    after: Annotated[tuple[Dependency, ...], _v(check_after)] = ()
    array: Annotated[ArrayRequest | None, _v(check_array)] = None
    distributed: Annotated[Distributed | None, _v(check_distributed)] = None
    hold: Annotated[bool | None, _v(check_preemptible)] = None
    image: Annotated[str | None, _v(check_image)] = None
    container_engine: Annotated[ContainerEngine | None, _v(check_container_engine)] = None
    separate_stderr: Annotated[bool | None, _v(check_preemptible)] = None
    backend: Annotated[str | None, _v(check_backend)] = None
    nodes: Annotated[int, _v(check_nodes)] = 1


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


def run(
    model: type[_Strict], data: Mapping[str, Any], now: float
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """What spec.fields.check_fields answers, by pydantic: (values, errors); `data` holds
    only the model's keys."""
    try:
        instance = model.model_validate(dict(data), context={"now": now})
    except ValidationError as e:
        return {}, [_field_and_message(err) for err in e.errors(include_url=False)]
    return dict(instance), []
