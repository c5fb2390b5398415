"""What the backend remembers of its runs, one small file per run under
STATE_DIR/backends/NAME/runs/ (written whole, then renamed: a crash leaves the old file or
the new one): the Slurm job id sbatch gave, how gpupool stopped it (a preemption is
recorded so that the run's end reads as PREEMPTED; a cancel wins over it), the run's grace
and when SIGTERM was sent for the stop (the final scancel follows the grace), and the
refusal of a submission Slurm would not take. Slurm itself is the truth about the runs;
these files only name them."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from gpupool.core.execution import Handle, StopKind


@dataclass(frozen=True)
class RunRecord:
    slurm_id: str | None = None
    stop: StopKind | None = None
    refused: str | None = None  # why sbatch (or the renderer) would not take it
    grace_s: float = 0.0  # the run's (LaunchRequest.grace_s): SIGTERM, this long, scancel
    term_at: float | None = None  # when SIGTERM was sent for the stop (epoch s)
    ended_at: float | None = None  # when the final scancel was sent
    # The GPUs each of its tasks holds (one task per node: the run's GPUs per node), by
    # which Slurm's GPU utilization of it is read (gpu_use.py); 0: not known.
    gpus_per_task: int = 0


class RunBook:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._cache: dict[Handle, RunRecord] = {}

    def _path(self, handle: Handle) -> Path:
        return self.root / f"{handle.job_id}-{handle.attempt}.json"

    def get(self, handle: Handle) -> RunRecord | None:
        if handle in self._cache:
            return self._cache[handle]
        try:
            raw = json.loads(self._path(handle).read_text())
        except (FileNotFoundError, ValueError):
            return None
        stop = raw.get("stop")
        record = RunRecord(
            raw.get("slurm_id"),
            StopKind(stop) if stop else None,
            raw.get("refused"),
            float(raw.get("grace_s") or 0.0),  # a record of an older version has none
            raw.get("term_at"),
            raw.get("ended_at"),
            int(raw.get("gpus_per_task") or 0),
        )
        self._cache[handle] = record
        return record

    def put(self, handle: Handle, record: RunRecord) -> None:
        path = self._path(handle)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(record)))
        os.replace(tmp, path)
        self._cache[handle] = record

    def _current(self, handle: Handle) -> RunRecord:
        return self.get(handle) or RunRecord()

    def set_slurm_id(self, handle: Handle, slurm_id: str) -> None:
        self.put(handle, replace(self._current(handle), slurm_id=slurm_id))

    def set_shape(self, handle: Handle, grace_s: float, gpus_per_task: int) -> None:
        """What the run is launched with that its end is read by: its grace, its GPUs."""
        current = self._current(handle)
        if (current.grace_s, current.gpus_per_task) != (grace_s, gpus_per_task):
            self.put(handle, replace(current, grace_s=grace_s, gpus_per_task=gpus_per_task))

    def set_term_at(self, handle: Handle, when: float) -> None:
        self.put(handle, replace(self._current(handle), term_at=when))

    def set_ended_at(self, handle: Handle, when: float) -> None:
        self.put(handle, replace(self._current(handle), ended_at=when))

    def set_refused(self, handle: Handle, why: str) -> None:
        self.put(handle, replace(self._current(handle), refused=why))

    def set_stop(self, handle: Handle, kind: StopKind) -> None:
        """A cancel wins over a preemption already recorded, never the other way."""
        current = self._current(handle)
        if current.stop is not StopKind.CANCEL:
            self.put(handle, replace(current, stop=kind))
