"""The warning before a job's time limit, for supervisor.py: when it is due, whether it is
sent, and what the job's log says (`submit --signal USR1@120`, docs/jobs.md).

launch.json's `warning` (a `WarningFile`, written by local.py from LaunchRequest.warning)
asks for `signal` to every process of the job `before_s` seconds before its time limit:
once, at once when the limit is nearer than that as the job starts, never without a limit.
The limit may move while the job runs (control.json): the warning moves with it, and once
sent it is not sent again. `if_checkpointed`, the job's checkpoint directory, makes it the
checkpoint default a job that named no --signal gets: sent only if that directory holds
something (the job has checkpointed, so it handles the signal): from the warning's time
on, the first time the supervisor finds it not empty (it looks each second until the limit).

The supervisor does the sending (to its cgroup's members, else its session); this module
only decides, so the rule is tested without processes (tests/unit/test_job_warning.py).

Standard library only: supervisor.py runs as a script (``python -I -S``) and imports this
module as its sibling, never gpupool.
"""

import os
import signal

TYPE_CHECKING = False  # as in supervisor.py: typing is not imported at run time
if TYPE_CHECKING:
    from gpupool.executor.launch_files import WarningFile


class LimitWarning:
    """The run's warning, as its wait loop asks about it (`take`, `wake_at`)."""

    def __init__(self, spec: "WarningFile | None") -> None:
        self.signum = int(spec.get("signal") or 0) if spec else 0
        self.before_s = float(spec.get("before_s") or 0.0) if spec else 0.0
        self.checkpoint_dir = spec.get("if_checkpointed") if spec else None
        self.done = self.signum <= 0 or self.before_s <= 0  # sent, or none asked

    def due_at(self, deadline: "float | None") -> "float | None":
        """When it is due, on the clock of `deadline` (the time limit's); None: never."""
        if self.done or deadline is None:
            return None
        return deadline - self.before_s

    def wake_at(self, now: float, deadline: "float | None") -> "float | None":
        """When the wait loop must look again, for the warning or the limit: the warning's
        time while it is ahead, else the limit's (a default waiting for a checkpoint is
        looked at on each of the loop's turns, at least one a second)."""
        due = self.due_at(deadline)
        return due if due is not None and due > now else deadline

    def take(self, now: float, deadline: "float | None") -> "str | None":
        """The line for the job's log when the signal is to be sent now (and then never
        again); None when it is not: not yet, never, the limit already reached, or (the
        checkpoint default) nothing checkpointed yet, looked at again the next time."""
        due = self.due_at(deadline)
        if due is None or deadline is None or now < due or now >= deadline:
            return None
        if self.checkpoint_dir is not None and not holds_something(self.checkpoint_dir):
            return None  # a USR1 could kill a job that does not checkpoint (module docstring)
        self.done = True
        left = deadline - now
        on_time = left >= self.before_s - 1.0  # the loop wakes at the warning's time
        before = f"{self.before_s:g}" if on_time else f"{round(left, 1):g}"
        line = f"sending {signal_name(self.signum)}, {before} s before the time limit"
        if self.checkpoint_dir is not None:
            return (
                f"{line}: the job has checkpointed (its GPUPOOL_CHECKPOINT_DIR is not empty), "
                "the default without --signal (--signal none turns it off)"
            )
        return line if on_time else f"{line} ({self.before_s:g} s asked: the limit was nearer)"


def holds_something(directory: str) -> bool:
    """Whether `directory` has an entry; False when it cannot be read."""
    try:
        with os.scandir(directory) as entries:
            return next(entries, None) is not None
    except OSError:
        return False


def signal_name(signum: int) -> str:
    """'SIGUSR1' for 10; 'signal 40' for a number without a name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
