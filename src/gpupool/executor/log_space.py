"""The disk under a job's log, watched by its supervisor (supervisor.py's sibling, run with it
as a script: standard library only, never importing gpupool).

The job writes its output straight to output.log: a write that a full disk refuses is the
job's own, and the supervisor never sees it. So the supervisor looks at the disk instead, at
each turn of its wait loop (at least once a second) and once more when the job has ended:
while no block is free for the job's writes, what the job writes to its log is lost. Each
such stretch (when it was first seen full, and when it had room again or the job ended,
wall-clock seconds) is said in the log once there is room again, or at the job's end, and is
kept for exit.json (`output_lost`), from which the daemon tells it in the job's history.

A stretch shorter than one turn of the loop may go unseen; that is the price of not
copying the job's output through the supervisor (docs/ARCHITECTURE.md, "A full state
disk").
"""

import os
import time

TYPE_CHECKING = False  # typing costs ~4 ms of every launch; mypy takes this as true
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_GAPS = 100  # kept in exit.json; past this the last one grows to cover the rest


def free_blocks(directory: str, privileged: bool) -> int | None:
    """Blocks free on the file system of ``directory`` for the job's writes: those left to
    everyone, or for a privileged (root) job also those reserved for root; None when the
    file system cannot be asked."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_bfree if privileged else st.f_bavail


def gap_line(gap: "list[float]") -> str:
    """'output lost: the disk of this log was full from 12:03:10 to 12:05:40; what the job
    wrote then is not in this log' (clock times of this machine)."""
    start, end = (time.strftime("%H:%M:%S", time.localtime(t)) for t in gap)
    when = f"at {start}" if start == end else f"from {start} to {end}"
    return (
        f"output lost: the disk of this log was full {when}; "
        "what the job wrote then is not in this log"
    )


class LogDiskWatch:
    """The stretches during which the disk of ``directory`` was full (module docstring)."""

    def __init__(
        self, directory: str, privileged: bool, free: "Callable[[str, bool], int | None]"
    ) -> None:
        self.directory = directory
        self.privileged = privileged
        self.free = free  # free_blocks, or a test's
        self.gaps: list[list[float]] = []  # every stretch seen, for exit.json
        self.unsaid: list[list[float]] = []  # ended stretches not yet said in the log
        self._full_since: float | None = None

    def look(self, now: float, log_fd: int) -> None:
        """Look once at the disk; once it has room, say the stretches that ended in the log
        ``log_fd``."""
        if self.free(self.directory, self.privileged) == 0:
            if self._full_since is None:
                self._full_since = now
            return
        if self._full_since is not None:
            self._close(now)
        self.say(log_fd)

    def finish(self, now: float, log_fd: int) -> None:
        """The job has ended: look once more, end a stretch still open at ``now``, and say
        what can be said in the log ``log_fd`` (the rest after the exit record)."""
        self.look(now, log_fd)
        if self._full_since is not None:
            self._close(now)
            self.say(log_fd)

    def _close(self, now: float) -> None:
        assert self._full_since is not None
        gap = [self._full_since, now]
        self._full_since = None
        if len(self.gaps) < MAX_GAPS:
            self.gaps.append(gap)
            self.unsaid.append(gap)
        else:  # the last one covers the rest
            self.gaps[-1][1] = now
            if not self.unsaid:
                self.unsaid.append(self.gaps[-1])

    def _ends_a_line(self) -> bool:
        """The log is empty or ends with a newline (or cannot be read: assume so)."""
        try:
            with open(os.path.join(self.directory, "output.log"), "rb") as f:
                if f.seek(0, os.SEEK_END) == 0:
                    return True
                f.seek(-1, os.SEEK_END)
                return f.read(1) == b"\n"
        except OSError:
            return True

    def say(self, log_fd: int) -> None:
        """Write a line for each stretch not yet said to the log ``log_fd``; one that the
        disk still refuses is tried again at the next call."""
        while self.unsaid:
            line = f"gpupool: {gap_line(self.unsaid[0])}\n".encode()
            if not self._ends_a_line():
                line = b"\n" + line  # after a line the full disk cut short
            try:
                os.write(log_fd, line)  # a part of it, on a nearly full disk, is kept too
            except OSError:
                return
            self.unsaid.pop(0)
