"""The rule for each field of a job spec: plain functions that take what a user (or the
HTTP API) gave and return the final value, or raise a ValueError saying what is wrong.

Each accepts exactly the forms we document, so no library's coercions (True as 1, "2.5"
as a float...) decide what a user meant. Standard library only; model.py's tables name them
and fields.py runs them.
None (a key left empty in YAML) means "not given" and yields the default.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shlex
from collections.abc import Callable, Mapping

from gpupool.core.containers import ContainerEngine
from gpupool.core.job_enums import DEFAULT_PRIORITY, PRIORITY_CLASSES, Distributed
from gpupool.core.units import parse_duration, parse_size

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# core.monitoring (the GPUPOOL_SIMULATED_* variables a job may set) is imported by the rule
# that needs it, when a spec has such a variable: its frozen dataclasses (about a millisecond
# each to create) a plain `gpupool submit -- CMD` never needs. The rules of retries,
# dependencies and arrays are in control_rules.py.


class BadValue(ValueError):
    """A value breaks its field's rule. A ValueError, the one kind spec/fields.py collects
    as a field's error (a TypeError would escape validation instead, as it did pydantic's)."""


# Upper bounds keep absurd values (a typo, or an overflowing 400-digit number) out of the
# store and the scheduler's arithmetic; no real job comes near them.
MAX_GPUS = 1024
MAX_CPUS = 65536
MAX_MEM_BYTES = 1 << 60  # 1 EiB
MAX_TIME_S = 366 * 86400.0
MAX_GRACE_S = 3600.0
DEFAULT_GRACE_S = 30.0
MAX_PRIORITY = 1000
MAX_NAME = 128
MAX_GPU_TYPE = 64
MAX_BEGIN_AHEAD_S = 366 * 86400.0
MAX_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z: past it, dates cannot be formatted
# Sizes (characters) of the free-form fields. One string exec() takes (an argument, or an
# environment entry NAME=value) is at most 128 KiB on Linux (MAX_ARG_STRLEN): a longer one
# could never run. The totals keep one job's spec small in the store and in every answer
# that lists it; the API's body limit (api/limits.py) is the first, cheaper, cut.
MAX_ARG = 128 * 1024
MAX_ARGS = 4096
MAX_COMMAND_TOTAL = 256 * 1024
MAX_ENV_NAME = 256
MAX_ENV_ENTRY = 128 * 1024  # NAME=value
MAX_ENV_VARS = 4096
MAX_ENV_TOTAL = 256 * 1024  # the job's own --env
MAX_BASE_ENV_TOTAL = 512 * 1024  # the submitter's environment
MAX_WORKDIR = 4096  # PATH_MAX
MAX_NODES = 4096

_PROJECT_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BARE_NUMBER_RE = re.compile(r"\s*\d+(\.\d*)?\s*")
# The pool sets these per job; letting a job override them would defeat GPU isolation.
RESERVED_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"})
RESERVED_ENV_PREFIX = "GPUPOOL_"


def got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def number_of(value: Any) -> int | float | None:
    """An int or float from a number or its text; None for anything else (bools included:
    `gpus: true` is never meant as 1)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"[-+]?\d+", s):
            return int(s)
        if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+)", s):
            return float(s)
    return None


def count_of(value: Any, noun: str, minimum: int, maximum: int, fraction_note: str = "") -> int:
    wrong = f"must be a whole number of {noun} >= {minimum}, got {got(value)}"
    n = number_of(value)
    if n is None or (isinstance(n, float) and not math.isfinite(n)):
        raise BadValue(wrong)
    if isinstance(n, float):
        if not n.is_integer():
            raise BadValue(f"must be a whole number of {noun}{fraction_note}, got {got(value)}")
        n = int(n)
    if n < minimum:
        raise BadValue(wrong)
    if n > maximum:
        raise BadValue(f"must be at most {maximum} {noun}, got {got(value)}")
    return n


def _text(value: Any, *, limit: int) -> str:
    if not isinstance(value, str):
        raise BadValue(f"must be a string, got {got(value)}")
    if not value.isprintable():
        raise BadValue(f"must not contain newlines or other control characters, got {got(value)}")
    if len(value) > limit:
        raise BadValue(f"must be at most {limit} characters, got {len(value)}")
    return value


def _no_nul(value: str) -> str:
    if "\x00" in value:  # cannot be passed to exec()
        raise BadValue(f"must not contain NUL characters, got {got(value)}")
    return value


def check_name(value: Any) -> str:
    return "" if value is None else _text(value, limit=MAX_NAME)


def split_command(value: Any, *, allow_string: bool = True) -> list[Any]:
    if value is None:
        raise BadValue("is required (a string such as 'python train.py', or a list)")
    if isinstance(value, str) and allow_string:
        try:
            words: list[Any] = shlex.split(value)
        except ValueError as e:  # shlex: "No closing quotation"
            raise BadValue(f"cannot split into words: {e}") from None
    elif isinstance(value, (list, tuple)):
        words = list(value)
    else:
        kinds = "a string or a list of strings" if allow_string else "a list of strings"
        raise BadValue(f"must be {kinds}, got {got(value)}")
    if not words:
        raise BadValue("must not be empty")
    if words[0] == "":
        raise BadValue("argv[0] (the program) must not be empty")
    if len(words) > MAX_ARGS:
        raise BadValue(f"must have at most {MAX_ARGS} words, got {len(words)}")
    total = sum(len(w) for w in words if isinstance(w, str))
    if total > MAX_COMMAND_TOTAL:
        raise BadValue(f"must be at most {MAX_COMMAND_TOTAL} characters in all, got {total}")
    return words


def check_arg(value: Any) -> str:
    # Numbers are allowed for `command: [sleep, 10]` written as a Python or JSON list.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise BadValue(f"must be a string, got {got(value)}")
    if len(value) > MAX_ARG:
        raise BadValue(f"must be at most {MAX_ARG} characters, got {len(value)}")
    return _no_nul(value)


def check_gpus(value: Any) -> int | float:
    """A whole number of GPUs, or a fraction of one GPU (0 < x < 1: shared by memory)."""
    if value is None:
        return 0
    n = number_of(value)
    if isinstance(n, float) and math.isfinite(n) and not n.is_integer():
        if 0 < n < 1:
            return n
        note = " (or a fraction of one GPU between 0 and 1, such as 0.5)"
        return count_of(value, "GPUs", 0, MAX_GPUS, note)
    return count_of(value, "GPUs", 0, MAX_GPUS)


def wire_gpus(value: Any) -> int:
    if value is None:
        return 0
    return count_of(value, "GPUs", 0, MAX_GPUS, " (a fraction of one GPU goes in gpu_fraction)")


def wire_fraction(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise BadValue(f"must be a number between 0 and 1 (exclusive), got {got(value)}")
    return float(value)


def check_preemptible(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise BadValue(f"must be true or false, got {got(value)}")


def check_distributed(value: Any) -> Distributed | None:
    """`--distributed` / `distributed:`: how to start the command as a gang of ranks."""
    if value is None or isinstance(value, Distributed):
        return value
    choices = ", ".join(d.value for d in Distributed)
    if isinstance(value, str):
        try:
            return Distributed(value.strip().lower())
        except ValueError:
            pass
    raise BadValue(f"must be one of {choices}, got {got(value)}")


MAX_IMAGE = 512
# An image reference (registry/name:tag, name@sha256:...), an apptainer source
# (docker://..., oras://...) or a path to an image file: never a word starting with "-",
# which an engine would read as one of its options.
_IMAGE_RE = re.compile(r"[A-Za-z0-9./_][A-Za-z0-9./_:@+=-]*")


def check_image(value: Any) -> str | None:
    """`--image` / `image:`: the container image the command runs in (docs/containers.md)."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_IMAGE or not _IMAGE_RE.fullmatch(value):
        raise BadValue(
            "must be an image reference such as registry.example/team/train:1.2, "
            "docker://ubuntu:24.04 or /images/train.sif (letters, digits and ./_:@+=-, "
            f"not starting with '-', at most {MAX_IMAGE} characters), got {got(value)}"
        )
    return value


def check_container_engine(value: Any) -> ContainerEngine | None:
    """`--container-engine` / `container_engine:`: the engine to run the image with."""
    if value is None or isinstance(value, ContainerEngine):
        return value
    if isinstance(value, str):
        try:
            return ContainerEngine(value.strip().lower())
        except ValueError:
            pass
    choices = ", ".join(e.value for e in ContainerEngine)
    raise BadValue(f"must be one of {choices}, got {got(value)}")


def check_backend(value: Any) -> str | None:
    """`--backend` / `backend:`: the `[backends.NAME]` engine to hand the job to, or
    `local` for the pool's own machine (docs/backends.md); None: its project's default. That
    the name is configured is the daemon's to check, at submit."""
    from gpupool.core.backends import BACKEND_NAME_RE, LOCAL_BACKEND

    if value is None:
        return None
    if isinstance(value, str) and (value == LOCAL_BACKEND or BACKEND_NAME_RE.fullmatch(value)):
        return value
    raise BadValue(
        f"must be `{LOCAL_BACKEND}` or a backend's name from gpupool.toml (a lower-case letter, "
        f"then letters, digits, _ or -, at most 32 characters), got {got(value)}"
    )


def check_nodes(value: Any) -> int:
    """`--nodes` / `nodes:`: the nodes a backend's job spans (its GPUs, CPUs and memory are
    per node)."""
    return 1 if value is None else count_of(value, "nodes", 1, MAX_NODES)


def check_gpu_type(value: Any) -> str | None:
    if value is None:
        return None
    text = _text(value, limit=MAX_GPU_TYPE).strip()
    if not text:
        raise BadValue("must not be empty (leave it out to accept any GPU type)")
    return text


def check_cpus(value: Any) -> int | None:
    return None if value is None else count_of(value, "CPUs", 1, MAX_CPUS)


def check_mem(value: Any) -> int | None:
    if value is None:
        return None
    # units.parse_size reads a bare number as bytes, Slurm's --mem reads it as megabytes:
    # either guess would be silently wrong for half the users, so ask for the unit.
    if isinstance(value, (int, float)) or (
        isinstance(value, str) and _BARE_NUMBER_RE.fullmatch(value)
    ):
        raise BadValue(f"needs a unit, such as 32GB or 512MB, got {got(value)}")
    if not isinstance(value, str):
        raise BadValue(f"must be a size such as 32GB, got {got(value)}")
    n = parse_size(value)  # its ValueError already says what is wrong
    if n <= 0:
        raise BadValue(f"must be more than 0 bytes, got {got(value)}")
    if n > MAX_MEM_BYTES:
        raise BadValue(f"must be at most 1EiB, got {got(value)}")
    return n


def _duration(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BadValue(f"must be a duration such as 2h or 30m, got {got(value)}")
    seconds = parse_duration(value)
    if not math.isfinite(seconds):
        raise BadValue(f"must be a finite duration, got {got(value)}")
    return seconds


def check_time(value: Any) -> float | None:
    if value is None:
        return None
    seconds = _duration(value)  # a bare number is minutes, as in sbatch --time
    if seconds > MAX_TIME_S:
        raise BadValue(f"must be at most 366 days, got {got(value)}")
    return seconds


def check_grace(value: Any) -> float:
    if value is None:
        return DEFAULT_GRACE_S
    # parse_duration reads a bare number as minutes (Slurm's --time); for a kill delay
    # people mean seconds, so neither reading is safe.
    if (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
        isinstance(value, str) and _BARE_NUMBER_RE.fullmatch(value)
    ):
        raise BadValue(f"needs a unit, such as 30s or 2m, got {got(value)}")
    seconds = _duration(value)
    if seconds > MAX_GRACE_S:
        raise BadValue(f"must be at most 1h, got {got(value)}")
    return seconds


def check_begin(value: Any, now: float) -> float | None:
    """Epoch seconds from Slurm's --begin forms (see begin.py), relative to `now`.

    Only text: a bare number could be epoch seconds or Slurm's MMDDYY, so it is refused
    (the HTTP API's begin_time takes epoch seconds). A time in the past is kept (the job
    may start at once), floored at 0 so that it fits the wire form.
    """
    if value is None:
        return None
    # Here, not at the top: begin.py imports datetime, which a job without begin never needs.
    from gpupool.spec.begin import EXAMPLES as BEGIN_EXAMPLES
    from gpupool.spec.begin import parse_begin

    if not isinstance(value, str):
        raise BadValue(f"not a time: {got(value)} ({BEGIN_EXAMPLES})")
    try:
        t = parse_begin(value, now)
    except ValueError as e:
        raise BadValue(f"not a time: {got(value)} ({str(e) or BEGIN_EXAMPLES})") from None
    if t - now > MAX_BEGIN_AHEAD_S:
        raise BadValue(f"must be at most 366 days from now, got {got(value)}")
    return max(t, 0.0)


def check_project(value: Any) -> str:
    if value is None:
        return "default"
    if not isinstance(value, str) or not _PROJECT_RE.fullmatch(value):
        raise BadValue(f"must be 1-64 letters, digits, '_', '.' or '-', got {got(value)}")
    return value


def check_priority(value: Any) -> int:
    if value is None:
        return DEFAULT_PRIORITY
    if isinstance(value, str) and value.strip().lower() in PRIORITY_CLASSES:
        return PRIORITY_CLASSES[value.strip().lower()]
    n = number_of(value)
    if isinstance(n, int) and 0 <= n <= MAX_PRIORITY:
        return n
    names = ", ".join(PRIORITY_CLASSES)
    raise BadValue(f"must be one of {names} or a whole number 0..{MAX_PRIORITY}, got {got(value)}")


def check_env_mapping(value: Any) -> Any:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadValue(f"must be a mapping of NAME: value, got {got(value)}")
    _check_env_size(value, MAX_ENV_TOTAL)
    if any(isinstance(k, str) and k.startswith(RESERVED_ENV_PREFIX) for k in value):
        _check_declared_use(value)
    return dict(value)


def _check_declared_use(value: Mapping[Any, Any]) -> None:
    """The GPU use a job declares for the simulated monitor (core.monitoring) must parse."""
    from gpupool.core.monitoring import (
        SIMULATED_MEMORY_ENV,
        SIMULATED_UTIL_ENV,
        simulated_memory,
        simulated_util,
    )

    declared = value.get(SIMULATED_UTIL_ENV)
    if isinstance(declared, str):
        try:
            simulated_util({SIMULATED_UTIL_ENV: declared})
        except ValueError as exc:
            raise BadValue(str(exc)) from None
    memory = value.get(SIMULATED_MEMORY_ENV)
    if isinstance(memory, str):
        try:
            simulated_memory({SIMULATED_MEMORY_ENV: memory})
        except ValueError as exc:
            raise BadValue(str(exc)) from None


def _check_env_size(env: Mapping[Any, Any], total_limit: int) -> None:
    """BadValue for too many variables or too many characters in all (names and values that
    are not strings are left to their own checks)."""
    if len(env) > MAX_ENV_VARS:
        raise BadValue(f"must have at most {MAX_ENV_VARS} variables, got {len(env)}")
    total = sum(
        len(k) + 1 + len(v) for k, v in env.items() if isinstance(k, str) and isinstance(v, str)
    )
    if total > total_limit:
        raise BadValue(f"must be at most {total_limit} characters in all, got {total}")


def check_env_name(value: Any) -> str:
    if isinstance(value, str) and len(value) > MAX_ENV_NAME:
        raise BadValue(f"must be at most {MAX_ENV_NAME} characters, got {len(value)}")
    if not isinstance(value, str) or not _ENV_NAME_RE.fullmatch(value):
        raise BadValue(
            "is not a valid variable name (letters, digits and _, not starting with a digit)"
        )
    if value in RESERVED_ENV:
        raise BadValue("is set by gpupool for each job (to the GPUs it was given)")
    if value.startswith(RESERVED_ENV_PREFIX) and value not in _user_set_env():
        raise BadValue(f"names starting with {RESERVED_ENV_PREFIX} are set by gpupool")
    return value


def _user_set_env() -> frozenset[str]:
    """GPUPOOL_ names a job may set: what it declares to the pool (core.monitoring)."""
    from gpupool.core.monitoring import SIMULATED_MEMORY_ENV, SIMULATED_UTIL_ENV

    return frozenset({SIMULATED_UTIL_ENV, SIMULATED_MEMORY_ENV})


def check_env_value(value: Any) -> str:
    if value is None:
        raise BadValue("has no value (write NAME: '' for an empty string)")
    if isinstance(value, bool):  # only from Python/JSON callers; a YAML file keeps its text
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        raise BadValue(f"must be a string, got {got(value)}")
    if len(value) > MAX_ENV_ENTRY:
        raise BadValue(f"must be at most {MAX_ENV_ENTRY} characters, got {len(value)}")
    return _no_nul(value)


def check_workdir(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadValue(f"must be a string, got {got(value)}")
    if not os.path.isabs(value):
        hint = " (~ is not expanded)" if value.startswith("~") else ""
        raise BadValue(f"must be an absolute path{hint}, got {got(value)}")
    if len(value) > MAX_WORKDIR:
        raise BadValue(f"must be at most {MAX_WORKDIR} characters, got {len(value)}")
    return _no_nul(value)


def _last_one_remembered(
    clean: Callable[[Mapping[Any, Any]], tuple[tuple[str, str], ...]],
) -> Callable[[object], tuple[tuple[str, str], ...]]:
    """`clean`, remembering its last environment and answer: a sweep's jobs are made in one
    environment (~40 variables), and each cleaning it again was most of a batch's checks,
    on the client and in the daemon (docs/benchmarks.md, issue 16). The same answer is the
    same tuple, so the jobs share one copy (in memory; the store encodes it once).

    What is remembered is a copy of the input, compared by equality (a dict changed in
    place is cleaned again), in one slot replaced whole (threads see a pair or the other).
    Only an environment that was clean is remembered: an error is raised every time."""
    last: list[tuple[dict[Any, Any], tuple[tuple[str, str], ...]]] = []

    @functools.wraps(clean)
    def remembered(value: object) -> tuple[tuple[str, str], ...]:
        if value is None:
            return ()
        if not isinstance(value, Mapping):
            raise BadValue(f"must be a mapping of NAME: value, got {got(value)}")
        known = last[0] if last else None
        if known is not None and known[0] == value:
            return known[1]
        copy = dict(value)
        answer = clean(copy)
        last[:] = [(copy, answer)]
        return answer

    return remembered


@_last_one_remembered
def clean_base_env(value: Mapping[Any, Any]) -> tuple[tuple[str, str], ...]:
    """The submitter's environment, sorted, without what the pool sets for each job."""
    _check_env_size(value, MAX_BASE_ENV_TOTAL)
    kept = []
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise BadValue(f"names and values must be strings, got {got(k)}: {got(v)}")
        if len(k) + 1 + len(v) > MAX_ENV_ENTRY:
            raise BadValue(f"{got(k)}: must be at most {MAX_ENV_ENTRY} characters as NAME=value")
        if k in RESERVED_ENV or k.startswith(RESERVED_ENV_PREFIX):
            continue
        if not k or "=" in k or "\x00" in k or "\x00" in v:  # cannot be passed to exec()
            raise BadValue(f"{got(k)} cannot be an environment variable")
        kept.append((k, v))
    return tuple(sorted(kept))


def _finite(value: int | float) -> bool:
    # math.isfinite(10**400) raises OverflowError (not a ValueError: it would escape
    # validation), and JSON can carry such an int.
    return isinstance(value, int) or math.isfinite(value)


def seconds(value: Any, maximum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadValue(f"must be a number of seconds, got {got(value)}")
    if not (_finite(value) and 0 < value <= maximum):
        raise BadValue(f"must be more than 0 and at most {maximum:g} seconds, got {value!r}")
    return float(value)


def wire_mem(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_MEM_BYTES:
        raise BadValue(f"must be a whole number of bytes > 0, got {got(value)}")
    return value


def seconds_or_none(value: Any, maximum: float) -> float | None:
    return None if value is None else seconds(value, maximum)


def wire_begin(value: Any) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (_finite(value) and 0 <= value <= MAX_EPOCH)
    ):
        raise BadValue(
            f"must be epoch seconds from 0 to {MAX_EPOCH:.0f}, or null, got {got(value)}"
        )
    return float(value)


MAX_UMASK = 0o777


def check_umask(value: Any) -> int | None:
    """A umask as a number (JSON has no octal: 18 is 022), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_UMASK:
        raise BadValue(f"must be a umask from 0 to 511 (0o777), or null, got {got(value)}")
    return value


def wire_workdir(value: Any) -> str:
    # "" is a spec built with no default_workdir: the daemon decides.
    return "" if value in (None, "") else check_workdir(value) or ""
