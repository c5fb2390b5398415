"""A job's names as the CLI reads them: its states, the hold kinds, the gang launchers, the
priority classes. Enums and constants only, no dataclass: `gpupool submit` checks a spec and
`gpupool queue` reads states with these alone, without `dataclasses` (which imports
`inspect`: ~9 ms) and core/job.py's dataclasses. core/job.py re-exports every name here.
"""

from __future__ import annotations

from enum import Enum, StrEnum


class Distributed(StrEnum):
    """How a job's command is started as a gang of ranks (`--distributed`; docs/distributed.md).

    TORCHRUN: one process per GPU with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT, ...), started by gpupool's own launcher, not by torchrun.
    """

    TORCHRUN = "torchrun"


class JobState(str, Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"  # stopped to give GPUs back; requeued to PENDING right after

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def active(self) -> bool:
        return not self.terminal


TERMINAL_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT}
)


class Hold(StrEnum):
    """Why a pending job is held (`gpupool hold`, `submit --hold`): it never starts until
    released. As Slurm's JobHeldUser and JobHeldAdmin: a hold its owner placed may be
    released by its owner or an admin; a hold an admin placed on another user's job only by
    an admin (api/steering.py)."""

    USER = "user"
    ADMIN = "admin"


PRIORITY_CLASSES: dict[str, int] = {"low": 100, "normal": 200, "high": 300, "interactive": 400}
DEFAULT_PRIORITY = PRIORITY_CLASSES["normal"]
