"""A JobSpec as the HTTP API carries it: a JSON-safe dict, flat, in bytes and seconds.

spec_to_wire runs in the CLI on every submit, so it needs neither pydantic nor yaml;
spec_from_wire runs in the daemon and trusts nothing: it re-checks every field with the
same rules as a spec file.
"""

from __future__ import annotations

from collections.abc import Mapping

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpupool.core.job import JobSpec
    from gpupool.core.json_types import JsonObject


def spec_to_wire(spec: JobSpec) -> JsonObject:
    """JSON-safe dict; spec_from_wire(spec_to_wire(s)) == s for every valid spec."""
    return wire_of(vars(spec), vars(spec.resources))


def wire_of(spec: Mapping[str, Any], r: Mapping[str, Any]) -> JsonObject:
    """The wire form of a JobSpec given by its fields (`spec`, by name; its `resources`
    are not read) and its Resources' (`r`): what spec_to_wire sends, from
    vars() of the two dataclasses, and model.build_wire, from the values it checked."""
    wire: JsonObject = {
        "command": list(spec["command"]),
        "name": spec["name"],
        "project": spec["project"],
        "priority": spec["priority"],
        "gpus": r["gpus"],
        "gpu_type": r["gpu_type"],
        "cpus": r["cpus"],
        "mem_bytes": r["mem_bytes"],
        # Fractional jobs (gpus 1): memory on one shared GPU, or a fraction of its memory.
        "gpu_memory_bytes": r["gpu_memory_bytes"],
        "gpu_fraction": r["gpu_fraction"],
        "time_limit_s": spec["time_limit_s"],
        "env": dict(spec["env"]),
        "base_env": dict(spec["base_env"]),
        "workdir": spec["workdir"],
        "umask": spec["umask"],  # the submitter's: its job's files are created as theirs
        "grace_s": spec["grace_s"],
        "begin_time": spec["begin_time"],  # epoch seconds, or None: free to start now
        "preemptible": spec["preemptible"],  # None: the default of its priority class
    }
    # Retries, dependencies and arrays only when asked for: a plain job's request stays
    # what a daemon that knows none of them accepts.
    if spec["retries"]:
        wire["retries"] = spec["retries"]
    if spec["retry_on_exit"]:
        wire["retry_on_exit"] = list(spec["retry_on_exit"])
    if spec["after"]:
        wire["after"] = [str(d) for d in spec["after"]]  # "ID:ok" / "ID:any"
    if spec["array"] is not None:
        wire["array"] = str(spec["array"])  # "0-99%8"
    if spec["distributed"] is not None:  # only then: a daemon without the key takes the rest
        wire["distributed"] = spec["distributed"].value
    if spec["hold"] is not None:  # submitted held (by its owner: the daemon makes it so)
        wire["hold"] = True
    if spec["separate_stderr"]:
        wire["separate_stderr"] = True
    if spec["backend"] is not None:  # only then, as for distributed
        wire["backend"] = spec["backend"]
    if spec["nodes"] != 1:
        wire["nodes"] = spec["nodes"]
    if spec["image"] is not None:
        wire["image"] = spec["image"]
    if spec["container_engine"] is not None:
        wire["container_engine"] = spec["container_engine"].value
    if spec["warning_signal"] is not None:  # only then, as for distributed
        from gpupool.spec.signal_rule import signal_text

        wire["warning_signal"] = signal_text(spec["warning_signal"])
    return wire


def spec_from_wire(d: Mapping[str, Any]) -> JobSpec:
    """The JobSpec a wire dict describes; SpecError naming each bad field (unknown keys too:
    a newer client's request the daemon does not understand must not be half obeyed)."""
    from gpupool.spec.model import spec_from_wire as from_wire

    return from_wire(d)
