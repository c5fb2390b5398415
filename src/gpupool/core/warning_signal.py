"""A signal sent to a job before its time limit, as Slurm's `sbatch --signal=B:USR1@120`:
what a job asks for (`submit --signal SIG@SECONDS`, or `none`) and what its run is given.

The rule (docs/jobs.md, "A warning before the time limit"): a job that names a signal gets
it once, `before_s` seconds before its time limit (at once when the limit is nearer than
that as it starts); `none` gets nothing; a job that names nothing gets the checkpoint
default, SIGUSR1 120 s before its limit, but only if by then it has written something to
its checkpoint directory: a USR1 kills a process that does not handle it, so only a job
that already checkpoints (and so is built to be stopped and resumed) gets one unasked. A
job without a time limit never gets a warning, whatever it asked for.

Standard library only. Not imported by a plain `gpupool submit` (dataclasses cost the CLI
~9 ms: tests/integration/test_cli_imports.py): the spec rule imports it when a job names
--signal.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

CHECKPOINT_WARNING_S = 120.0


@dataclass(frozen=True)
class WarningSignal:
    """Send `signum` to every process of the job `before_s` seconds before its time limit.

    `signum` 0 is `--signal none` (as kill's signal 0, which delivers nothing): no warning,
    not even the checkpoint default. `only_if_checkpointed` is the default's condition, never
    a user's: sent only if the job's checkpoint directory holds something when it is due."""

    signum: int
    before_s: float = 0.0
    only_if_checkpointed: bool = False

    @property
    def off(self) -> bool:
        return self.signum == 0


NO_WARNING = WarningSignal(0)
CHECKPOINT_WARNING = WarningSignal(
    int(signal.SIGUSR1), CHECKPOINT_WARNING_S, only_if_checkpointed=True
)


def run_warning(asked: WarningSignal | None) -> WarningSignal | None:
    """What a run of a job that asked for `asked` (None: named no --signal) is given: None
    for no warning. Whether it has a time limit is the executor's to see (a running job's
    limit can be set or moved: `gpupool update --time`)."""
    if asked is None:
        return CHECKPOINT_WARNING
    return None if asked.off else asked
