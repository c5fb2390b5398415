"""Job traces from files: the Philly table, Helios/Acme cluster logs, and a plain CSV.

Each format becomes the same `Trace` (sim.model), so the event loop never knows where jobs
came from. Each loader is only a column mapping; reading cells and saying where a bad one is
("<file> line <n>: <field>: <problem>") is sim.csvrows'.

Rows that are valid but cannot be replayed (no GPUs, no run time, outside the time window)
are left out and counted by reason in `Trace.skipped`, for the report to say.

The path "philly" (with format "philly") means the copy shipped in the package
(`packaged_philly_path()`), so `gpupool sim --trace philly` works from a fresh install; write
"./philly" for a local file of that name.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from gpupool.core.units import parse_duration, parse_size
from gpupool.sim.csvrows import Rows, TraceError, open_text
from gpupool.sim.model import Trace, TraceJob

__all__ = ["FORMATS", "PACKAGED_PHILLY", "TraceError", "load_trace", "packaged_philly_path"]

FORMATS = ("philly", "helios", "csv")
PACKAGED_PHILLY = "philly"  # the path that means the shipped copy
NO_GPUS, NO_DURATION, OUTSIDE = "no GPUs", "no duration", "outside the time window"

# A job before its submit time is known relative to the origin:
# (submit epoch or seconds, id, duration_s, gpus, user, project, time_limit_s, gpu_memory_bytes)
Raw = tuple[float, int, float, int, str, str, float | None, int | None]
Loaded = tuple[list[Raw], dict[str, int]]


def packaged_philly_path() -> Path:
    """The Philly job table shipped with gpupool (sim/data/ATTRIBUTION.md says whose)."""
    return Path(str(resources.files("gpupool.sim") / "data" / "philly_jobs.csv.gz"))


def load_trace(
    path: str | Path,
    fmt: str,
    *,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
) -> Trace:
    """Read a trace: jobs sorted by (submit_s, id), submit_s in seconds from the origin.

    since/until (philly and helios, which carry dates) keep the jobs submitted in that
    window, both ends included; naive times are UTC. The origin is `since` when given (as
    Helios counts from its window start, so a quiet start stays quiet), else the first job.
    """
    if fmt not in _LOADERS:
        raise TraceError(f"unknown trace format {fmt!r} (one of: {', '.join(FORMATS)})")
    name = str(path)
    if fmt == "philly" and name == PACKAGED_PHILLY:
        path = packaged_philly_path()
    lo = _window_edge(since, "since")
    hi = _window_edge(until, "until")
    if fmt == "csv" and (lo is not None or hi is not None):
        raise TraceError("since/until need a trace with dates (philly, helios); csv has seconds")
    if lo is not None and hi is not None and hi < lo:
        raise TraceError(f"until ({until}) is before since ({since})")
    try:
        with open_text(Path(path)) as stream:
            raw, skipped = _LOADERS[fmt](Rows(stream, name), lo, hi)
    except (UnicodeDecodeError, EOFError, gzip.BadGzipFile, csv.Error) as e:
        raise TraceError(f"{name}: not a readable CSV file: {e}") from None
    except OSError as e:
        raise TraceError(f"{name}: cannot read: {e.strerror or e}") from None
    origin = lo if lo is not None else min((r[0] for r in raw), default=0.0)
    shifted = sorted((r[0] - origin, *r[1:]) for r in raw)  # ids are unique: no ties beyond
    jobs = tuple(TraceJob(i, t, d, g, u, p, lim, mem) for t, i, d, g, u, p, lim, mem in shifted)
    label = "philly" if name == PACKAGED_PHILLY else Path(name).name
    if since is not None or until is not None:
        label += f" [{since or '...'} .. {until or '...'}]"
    return Trace(jobs=jobs, name=label, skipped=skipped)


def _window_edge(value: str | datetime | None, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise TraceError(
                f"{what}: {value!r} is not a date and time (e.g. 2017-10-01 00:00:00)"
            ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _count(skipped: dict[str, int], reason: str) -> None:
    skipped[reason] = skipped.get(reason, 0) + 1


def _skip_reason(
    gpus: int, duration: float, submit: float, lo: float | None = None, hi: float | None = None
) -> str | None:
    """Why a valid row is not replayed (counted in Trace.skipped), or None to keep it."""
    if gpus == 0:
        return NO_GPUS
    if duration <= 0:
        return NO_DURATION
    if (lo is not None and submit < lo) or (hi is not None and submit > hi):
        return OUTSIDE
    return None


def _philly(rows: Rows, lo: float | None, hi: float | None) -> Loaded:
    """Pollux's philly.csv: ids are the 1-based data row, project the VC, no users."""
    i_ts, i_dur, i_gpus, i_vc = rows.index(("timestamp", "duration", "num_gpus", "cluster"))
    jobs: list[Raw] = []
    skipped: dict[str, int] = {}
    for n, row in enumerate(rows, start=1):
        submit = rows.epoch(row[i_ts], "timestamp")
        duration = rows.seconds(row[i_dur], "duration")
        gpus = rows.whole(row[i_gpus], "num_gpus")
        vc = rows.name_of(row[i_vc], "cluster")
        reason = _skip_reason(gpus, duration, submit, lo, hi)
        if reason is not None:
            _count(skipped, reason)
        else:
            jobs.append((submit, n, duration, gpus, "", vc, None, None))
    return jobs, skipped


def _helios(rows: Rows, lo: float | None, hi: float | None) -> Loaded:
    """Helios/Acme cluster_log.csv. Ids are the 1-based data row: job_id is not always a
    number there, and TraceJob ids are. submit_time: a date and time or epoch seconds."""
    cols = ("job_id", "user", "vc", "gpu_num", "submit_time", "duration")
    _, i_user, i_vc, i_gpus, i_submit, i_dur = rows.index(cols)
    jobs: list[Raw] = []
    skipped: dict[str, int] = {}
    for n, row in enumerate(rows, start=1):
        text = row[i_submit].strip()
        try:
            submit = float(text)
        except ValueError:
            submit = rows.epoch(text, "submit_time")
        if not math.isfinite(submit):
            raise rows.fail("submit_time", f"{text!r} is not a date and time or epoch seconds")
        gpus = rows.whole(row[i_gpus], "gpu_num")
        dur_text = row[i_dur].strip()
        missing = dur_text.lower() in ("", "nan", "none", "null")
        duration = 0.0 if missing else rows.seconds(dur_text, "duration")
        vc = rows.name_of(row[i_vc], "vc")
        reason = _skip_reason(gpus, duration, submit, lo, hi)
        if reason is not None:
            _count(skipped, reason)
        else:
            jobs.append((submit, n, duration, gpus, row[i_user].strip(), vc, None, None))
    return jobs, skipped


def _csv(rows: Rows, lo: float | None, hi: float | None) -> Loaded:
    """gpupool's own CSV. Submit times are shifted so the first job is at 0 (the Trace
    contract); an empty project is "default"; gpu_memory makes a fractional (1-GPU) job."""
    cols = ("submit_time_s", "duration_s", "num_gpus", "user", "project")
    i_sub, i_dur, i_gpus, i_user, i_proj, i_limit, i_mem, i_id = rows.index(
        cols, ("time_limit_s", "gpu_memory", "job_id")
    )
    jobs: list[Raw] = []
    skipped: dict[str, int] = {}
    seen: dict[int, int] = {}
    for n, row in enumerate(rows, start=1):
        submit = rows.seconds(row[i_sub], "submit_time_s")
        duration = rows.seconds(row[i_dur], "duration_s")
        mem_text = row[i_mem].strip() if i_mem >= 0 else ""
        memory = _memory(rows, mem_text) if mem_text else None
        gpu_text = row[i_gpus].strip()
        gpus = rows.whole(gpu_text, "num_gpus") if gpu_text or memory is None else 1
        if memory is not None:
            if gpus > 1:
                raise rows.fail("gpu_memory", f"shares one GPU: needs num_gpus 1, got {gpus}")
            gpus = 1
        limit_text = row[i_limit].strip() if i_limit >= 0 else ""
        limit = _time_limit(rows, limit_text) if limit_text else None
        job_id = n
        if i_id >= 0:
            job_id = rows.whole(row[i_id], "job_id")
            if job_id in seen:
                raise rows.fail("job_id", f"{job_id} is already used on line {seen[job_id]}")
            seen[job_id] = rows.line
        reason = _skip_reason(gpus, duration, submit)
        if reason is not None:
            _count(skipped, reason)
        else:
            project = row[i_proj].strip() or "default"
            user = row[i_user].strip()
            jobs.append((submit, job_id, duration, gpus, user, project, limit, memory))
    return jobs, skipped


def _time_limit(rows: Rows, text: str) -> float:
    """Seconds; a plain number is seconds (the column says so), or a form like 2h, 1-12:00:00."""
    try:
        x = float(text)
    except ValueError:
        try:
            x = parse_duration(text)
        except ValueError as e:
            raise rows.fail("time_limit_s", str(e)) from None
    if not math.isfinite(x) or x <= 0:
        raise rows.fail("time_limit_s", f"must be a positive number of seconds, got {text!r}")
    return x


def _memory(rows: Rows, text: str) -> int:
    try:
        size = parse_size(text)
    except ValueError as e:
        raise rows.fail("gpu_memory", str(e)) from None
    if size <= 0:
        raise rows.fail("gpu_memory", f"must be above 0, got {text!r}")
    return size


_LOADERS: dict[str, Callable[[Rows, float | None, float | None], Loaded]] = {
    "philly": _philly,
    "helios": _helios,
    "csv": _csv,
}
