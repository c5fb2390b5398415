"""A Ray backend's `[backends.NAME]` table (kind = "ray"), checked key by key.

`address` is required (Ray's dashboard, which serves the job submission API:
`http://HEAD:8265`); every other key is optional. An unknown key, or a value of the wrong
type, is refused with a BackendConfigError naming it, so a typo never passes for a
default. Nothing is contacted here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

from gpupool.core.backends import BackendConfigError

DEFAULT_REQUEST_TIMEOUT_S = 5.0
MAX_REQUEST_TIMEOUT_S = 60.0
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class WorkdirPolicy(StrEnum):
    """Where a run's command starts on the Ray cluster.

    SHARED: in the job's own workdir (`cd WORKDIR` before the command), for clusters that
    mount the same file systems as the pool's machine (the usual HPC layout). CLUSTER: where
    Ray starts an entrypoint (its session directory), for clusters that share nothing; the
    command must then find its files itself. The job's directory is never uploaded (Ray's
    `working_dir`): it would be copied as the daemon's user, whatever its size.
    """

    SHARED = "shared"
    CLUSTER = "cluster"


@dataclass(frozen=True)
class RaySettings:
    address: str  # http(s)://HOST:PORT of the head's dashboard (job submission API)
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S  # each HTTP call's deadline
    workdir: WorkdirPolicy = WorkdirPolicy.SHARED
    # The interpreter that runs a gang's driver on the cluster: it must import ray there
    # (the one Ray runs with). Single-node runs need no Python.
    driver_python: str = "python3"
    # Variables every run gets (runtime_env env_vars), under the job's own (which win).
    env_vars: Mapping[str, str] = field(default_factory=dict)

    @property
    def host_port(self) -> str:
        """HOST:PORT of `address`, as a run's ref names it (`ray://HOST:PORT/ID`)."""
        return urlsplit(self.address).netloc


KEYS = frozenset({"kind", "address", "request_timeout_s", "workdir", "driver_python", "env_vars"})


def _address(value: object) -> str:
    if not isinstance(value, str):
        raise BackendConfigError("address", "must be the URL of Ray's dashboard, as text")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BackendConfigError("address", f"must be http(s)://HOST:PORT, not {value!r}")
    try:
        port = parts.port
    except ValueError:
        raise BackendConfigError("address", f"has a bad port: {value!r}") from None
    if port is None:
        raise BackendConfigError("address", "must name the dashboard's port (usually 8265)")
    if parts.path.strip("/") or parts.query or parts.fragment or parts.username:
        raise BackendConfigError("address", "must be only http(s)://HOST:PORT")
    return f"{parts.scheme}://{parts.netloc}"


def _timeout(value: object) -> float:
    key = "request_timeout_s"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BackendConfigError(key, "must be a number of seconds")
    seconds = float(value)
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_REQUEST_TIMEOUT_S:
        raise BackendConfigError(key, f"must be more than 0 and at most {MAX_REQUEST_TIMEOUT_S:g}")
    return seconds


def _workdir(value: object) -> WorkdirPolicy:
    choices = ", ".join(p.value for p in WorkdirPolicy)
    if not isinstance(value, str):
        raise BackendConfigError("workdir", f"must be one of {choices}")
    try:
        return WorkdirPolicy(value)
    except ValueError:
        raise BackendConfigError("workdir", f"must be one of {choices}, not {value!r}") from None


def _python(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value):
        raise BackendConfigError("driver_python", "must be an interpreter's name or path")
    return value


def _env_vars(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise BackendConfigError("env_vars", "must be a table of NAME = value")
    out: dict[str, str] = {}
    for name, text in value.items():
        if not isinstance(name, str) or not _ENV_NAME_RE.fullmatch(name):
            raise BackendConfigError("env_vars", f"{name!r} is not a variable's name")
        if not isinstance(text, str) or "\0" in text:
            raise BackendConfigError(f"env_vars.{name}", "must be text")
        out[name] = text
    return out


def parse_settings(settings: Mapping[str, object]) -> RaySettings:
    """The checked settings (module docstring); BackendConfigError naming the first bad key."""
    for key in settings:
        if key not in KEYS:
            raise BackendConfigError(key, f"unknown key (known: {', '.join(sorted(KEYS))})")
    kind = settings.get("kind", "ray")
    if kind != "ray":
        raise BackendConfigError("kind", f"must be 'ray' for a Ray backend, not {kind!r}")
    if "address" not in settings:
        raise BackendConfigError("address", "is required: the head's dashboard URL")
    return RaySettings(
        address=_address(settings["address"]),
        request_timeout_s=_timeout(settings.get("request_timeout_s", DEFAULT_REQUEST_TIMEOUT_S)),
        workdir=_workdir(settings.get("workdir", WorkdirPolicy.SHARED.value)),
        driver_python=_python(settings.get("driver_python", "python3")),
        env_vars=_env_vars(settings.get("env_vars", {})),
    )
