"""What Slurm says about jobs, read into Observations. Pure: text in, data out.

Sources, in the order the backend asks them (backend.py): one `squeue -t all` for every
tracked run (slurmctld keeps an ended job MinJobAge seconds, 300 by default); for a run
slurmctld has forgotten, the jobcomp file (`JobCompType=jobcomp/filetxt`, read, not asked),
then `sacct` where accounting storage exists, then the run's own exit file written by its
batch script (render.py).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from enum import Enum

from gpupool.core.execution import ExitReason, ExitRecord, Observation, RunState, StopKind

# squeue's fields, each ended by "|" (a name or reason may hold spaces, never a "|").
SQUEUE_FIELDS = "JobID:|,Name:|,State:|,exit_code:|,Reason:|,StartTime:|,EndTime:|"
SACCT_FIELDS = "JobID,JobName,State,ExitCode,Start,End"


class Slot(Enum):
    """Where a Slurm state puts a run."""

    QUEUED = "queued"
    RUNNING = "running"
    ENDED = "ended"


# Slurm job states (squeue's long names; sacct adds "CANCELLED by UID") -> where the run is
# and, once ended, why. Any other state is UNKNOWN, with the state as detail.
SLOTS: dict[str, tuple[Slot, ExitReason | None]] = {
    "PENDING": (Slot.QUEUED, None),
    "CONFIGURING": (Slot.QUEUED, None),  # nodes being booted for it: nothing runs yet
    "REQUEUED": (Slot.QUEUED, None),
    "REQUEUE_HOLD": (Slot.QUEUED, None),
    "REQUEUE_FED": (Slot.QUEUED, None),
    "RESV_DEL_HOLD": (Slot.QUEUED, None),
    "RUNNING": (Slot.RUNNING, None),
    "COMPLETING": (Slot.RUNNING, None),  # its processes are being ended: not over yet
    "SUSPENDED": (Slot.RUNNING, None),
    "STOPPED": (Slot.RUNNING, None),
    "SIGNALING": (Slot.RUNNING, None),
    "STAGE_OUT": (Slot.RUNNING, None),
    "RESIZING": (Slot.RUNNING, None),
    "COMPLETED": (Slot.ENDED, ExitReason.EXITED),
    "FAILED": (Slot.ENDED, ExitReason.EXITED),
    "BOOT_FAIL": (Slot.ENDED, ExitReason.EXITED),
    "NODE_FAIL": (Slot.ENDED, ExitReason.EXITED),
    "OUT_OF_MEMORY": (Slot.ENDED, ExitReason.EXITED),
    "SPECIAL_EXIT": (Slot.ENDED, ExitReason.EXITED),
    "TIMEOUT": (Slot.ENDED, ExitReason.TIMEOUT),
    "DEADLINE": (Slot.ENDED, ExitReason.TIMEOUT),
    "CANCELLED": (Slot.ENDED, ExitReason.CANCELLED),
    "REVOKED": (Slot.ENDED, ExitReason.CANCELLED),
    "PREEMPTED": (Slot.ENDED, ExitReason.PREEMPTED),
}
# Ends that are not the command's own: a code of 0 would read as success.
_NOT_ZERO = {"BOOT_FAIL": 1, "NODE_FAIL": 1, "OUT_OF_MEMORY": 137}


@dataclass(frozen=True)
class JobRow:
    """One Slurm job as a source reported it. `code`/`signal`: its end, as the shell
    shows it (128+N for signal N) once it has ended."""

    job_id: str
    name: str
    state: str
    code: int
    signal: int | None
    reason: str
    start: float | None
    end: float | None


def _when(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S"))
    except ValueError:  # N/A, NONE, Unknown
        return None


def _from_wait_status(status: int) -> tuple[int, int | None]:
    """squeue's exit_code is a wait(2) status."""
    sig = status & 0x7F
    return (128 + sig, sig) if sig else ((status >> 8) & 0xFF, None)


def _from_pair(text: str) -> tuple[int, int | None]:
    """jobcomp's and sacct's ExitCode `CODE:SIGNAL`."""
    code, _, sig = text.partition(":")
    s = int(sig or 0)
    return (128 + s, s) if s else (int(code or 0), None)


def parse_squeue(text: str) -> list[JobRow]:
    rows = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 7 or not parts[0].strip():
            continue
        try:
            code, sig = _from_wait_status(int(parts[3].strip() or 0))
        except ValueError:
            code, sig = 0, None
        rows.append(
            JobRow(
                parts[0].strip(),
                parts[1].strip(),
                parts[2].strip(),
                code,
                sig,
                parts[4].strip(),
                _when(parts[5]),
                _when(parts[6]),
            )  # fmt: skip
        )
    return rows


_JOBCOMP_RE = re.compile(
    r"^JobId=(?P<id>\S+) .*?Name=(?P<name>.*?) JobState=(?P<state>\S+) .*?"
    r"StartTime=(?P<start>\S+) EndTime=(?P<end>\S+) .*ExitCode=(?P<exit>\d+:\d+)\s*$"
)


def parse_jobcomp(text: str) -> list[JobRow]:
    """jobcomp/filetxt's lines (one per ended job)."""
    rows = []
    for line in text.splitlines():
        m = _JOBCOMP_RE.match(line)
        if m:
            code, sig = _from_pair(m["exit"])
            rows.append(
                JobRow(m["id"], m["name"], m["state"], code, sig, "",
                       _when(m["start"]), _when(m["end"]))
            )  # fmt: skip
    return rows


def parse_sacct(text: str) -> list[JobRow]:
    """`sacct -n -P -X -o SACCT_FIELDS` (one line per job, `|` between fields)."""
    rows = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != 6:
            continue
        code, sig = _from_pair(parts[3])
        state = parts[2].split()[0] if parts[2].strip() else ""
        rows.append(JobRow(parts[0], parts[1], state, code, sig, "",
                           _when(parts[4]), _when(parts[5])))  # fmt: skip
    return rows


def observe(row: JobRow, ref: str, stop: StopKind | None, now: float) -> Observation:
    """The Observation of a run from its job's row. `stop`: the stop gpupool asked for
    (runs.py). A run it stopped ended as that stop says, whatever Slurm calls the end: its
    command may have ended itself in the grace after SIGTERM (COMPLETED, FAILED), or been
    ended by the final scancel (CANCELLED); a preemption is PREEMPTED, so it is requeued."""
    slot, reason = SLOTS.get(row.state, (None, None))
    if slot is Slot.QUEUED:
        why = row.reason if row.reason not in ("", "None") else row.state
        return Observation(RunState.QUEUED, ref=ref, detail=why)
    if slot is Slot.RUNNING:
        return Observation(RunState.RUNNING, ref=ref)
    if slot is None or reason is None:
        return Observation(RunState.UNKNOWN, ref=ref, detail=f"Slurm job state {row.state}")
    if stop is not None:
        reason = stop.exit_reason
    code = row.code or _NOT_ZERO.get(row.state, 0)
    end = row.end if row.end is not None else now
    start = row.start if row.start is not None else end
    said = f" ({row.reason})" if row.reason not in ("", "None") else ""
    message = f"Slurm job {row.job_id} {row.state}{said}"
    return Observation(
        RunState.EXITED, ExitRecord(code, row.signal, reason, start, end, message), ref=ref
    )
