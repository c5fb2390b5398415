"""Every Slurm command the backend runs goes through one CommandRunner: a deadline on each
(a slurmctld that is down makes squeue and sinfo wait for many seconds), the SLURM_CONF of
the settings, and a record of the calls (`calls`), which the tests count: a poll of any
number of runs is one squeue."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


class SlurmUnreachable(Exception):
    """A command that gave no answer: it ran past its deadline or could not be started."""


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass
class CommandRunner:
    timeout_s: float
    slurm_conf: Path | None = None
    calls: list[tuple[str, ...]] = field(default_factory=list)  # every argv run, in order

    def base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.slurm_conf is not None:
            env["SLURM_CONF"] = str(self.slurm_conf)
        return env

    def run(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> CommandResult:
        """Run `argv` (its program looked up on the daemon's PATH, whatever `env` says);
        raises SlurmUnreachable when it gives no answer in time or cannot be started."""
        self.calls.append(tuple(argv))
        program = shutil.which(argv[0]) or argv[0]
        try:
            proc = subprocess.run(
                [program, *argv[1:]],
                env=dict(env) if env is not None else self.base_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=self.timeout_s if timeout_s is None else timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise SlurmUnreachable(f"{argv[0]} gave no answer in {self.timeout_s:g} s") from None
        except OSError as exc:
            raise SlurmUnreachable(f"{argv[0]} could not be started: {exc.strerror}") from None
        return CommandResult(proc.returncode, proc.stdout, proc.stderr)
