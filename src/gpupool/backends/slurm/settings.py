"""A Slurm backend's `[backends.NAME]` table (kind = "slurm"), checked key by key.

Every key is optional; an unknown key, or a value of the wrong type, is refused with a
BackendConfigError naming it (`accounts.vision`, `gpu_flag`), so a typo never passes for a
default. Nothing is contacted here: the cluster's name, when not given, is asked of
`scontrol show config` by the backend the first time it needs it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from gpupool.core.backends import BackendConfigError

DEFAULT_COMMAND_TIMEOUT_S = 10.0
DEFAULT_CHECKPOINT_SIGNAL = "USR1@120"
# --signal's value: a signal name or number, optionally @seconds before the end (0-65535).
_SIGNAL_RE = re.compile(r"(?:[A-Z][A-Z0-9]{1,9}|[1-9][0-9]?)(?:@[0-9]{1,5})?")
_SLURM_WORD_RE = re.compile(r"[A-Za-z0-9_.+-]{1,64}")  # a partition, account, qos, cluster


class GpuFlag(StrEnum):
    """How GPUs are asked for: `--gpus-per-node=N` (cons_tres) or `--gres=gpu:N`."""

    GPUS_PER_NODE = "gpus-per-node"
    GRES = "gres"


@dataclass(frozen=True)
class SlurmSettings:
    cluster: str | None = None  # None: scontrol show config's ClusterName, else "slurm"
    partition: str | None = None  # every job's partition unless `partitions` maps its project
    partitions: Mapping[str, str] = field(default_factory=dict)  # project -> partition
    accounts: Mapping[str, str] = field(default_factory=dict)  # project -> account
    qos: Mapping[str, str] = field(default_factory=dict)  # project -> qos
    gpu_flag: GpuFlag = GpuFlag.GPUS_PER_NODE
    output_dir: Path | None = None  # None: STATE_DIR/backends/NAME/output (must be shared)
    slurm_conf: Path | None = None  # SLURM_CONF for every command; None: Slurm's default
    command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S
    checkpoint_signal: str | None = DEFAULT_CHECKPOINT_SIGNAL  # None: no --signal
    extra_sbatch_args: tuple[str, ...] = ()
    # The interpreter that runs the per-node rank launcher of a distributed job on the
    # compute nodes (stdlib only): it must exist there.
    launcher_python: str = "python3"

    def partition_for(self, project: str) -> str | None:
        return self.partitions.get(project, self.partition)


KEYS = frozenset(
    {
        "kind", "cluster", "partition", "partitions", "accounts", "qos", "gpu_flag",
        "output_dir", "slurm_conf", "command_timeout_s", "checkpoint_signal",
        "extra_sbatch_args", "launcher_python",
    }
)  # fmt: skip


def _word(key: str, value: object) -> str:
    if not isinstance(value, str) or not _SLURM_WORD_RE.fullmatch(value):
        raise BackendConfigError(key, "must be a Slurm name: letters, digits, _ . + -")
    return value


def _word_map(key: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise BackendConfigError(key, "must be a table of project = name")
    out: dict[str, str] = {}
    for project, name in value.items():
        if not isinstance(project, str) or not project:
            raise BackendConfigError(key, f"a project name must be text, not {project!r}")
        out[project] = _word(f"{key}.{project}", name)
    return out


def _path(key: str, value: object) -> Path:
    if not isinstance(value, str) or not value.startswith("/"):
        raise BackendConfigError(key, "must be an absolute path")
    return Path(value)


def _gpu_flag(value: object) -> GpuFlag:
    if isinstance(value, str) and value in {f.value for f in GpuFlag}:
        return GpuFlag(value)
    raise BackendConfigError("gpu_flag", 'must be "gpus-per-node" or "gres"')


def _timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 300:
        raise BackendConfigError("command_timeout_s", "must be a number of seconds in (0, 300]")
    return float(value)


def _signal(value: object) -> str | None:
    if value == "":
        return None
    if not isinstance(value, str) or not _SIGNAL_RE.fullmatch(value):
        raise BackendConfigError(
            "checkpoint_signal", 'must be SIGNAL[@SECONDS] as "USR1@120", or "" for none'
        )
    return value


def _extra(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(a, str) and a.startswith("--") and "\n" not in a for a in value
    ):
        raise BackendConfigError(
            "extra_sbatch_args", 'must be a list of long options, as ["--constraint=a100"]'
        )
    return tuple(value)


def _python(value: object) -> str:
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise BackendConfigError("launcher_python", "must be a command name or path")
    return value


def parse_settings(settings: Mapping[str, object]) -> SlurmSettings:
    """The table's settings, checked (module docstring); raises BackendConfigError."""
    unknown = sorted(set(settings) - KEYS)
    if unknown:
        raise BackendConfigError(unknown[0], f"unknown setting (known: {', '.join(sorted(KEYS))})")
    s = settings
    if "kind" in s and s["kind"] != "slurm":
        raise BackendConfigError("kind", 'must be "slurm" for this backend')
    d = SlurmSettings()
    return SlurmSettings(
        cluster=_word("cluster", s["cluster"]) if "cluster" in s else d.cluster,
        partition=_word("partition", s["partition"]) if "partition" in s else d.partition,
        partitions=_word_map("partitions", s.get("partitions", {})),
        accounts=_word_map("accounts", s.get("accounts", {})),
        qos=_word_map("qos", s.get("qos", {})),
        gpu_flag=_gpu_flag(s["gpu_flag"]) if "gpu_flag" in s else d.gpu_flag,
        output_dir=_path("output_dir", s["output_dir"]) if "output_dir" in s else None,
        slurm_conf=_path("slurm_conf", s["slurm_conf"]) if "slurm_conf" in s else None,
        command_timeout_s=(
            _timeout(s["command_timeout_s"]) if "command_timeout_s" in s else d.command_timeout_s
        ),
        checkpoint_signal=(
            _signal(s["checkpoint_signal"]) if "checkpoint_signal" in s else d.checkpoint_signal
        ),
        extra_sbatch_args=_extra(s["extra_sbatch_args"]) if "extra_sbatch_args" in s else (),
        launcher_python=(
            _python(s["launcher_python"]) if "launcher_python" in s else d.launcher_python
        ),
    )
