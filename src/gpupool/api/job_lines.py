"""Each job's JSON as one line, kept between requests (`GET /v1/jobs`: issue 35, goal 2b).

A listing of 10,000 jobs spent ~60 us a job making its wire dict and encoding it, on every
request, though most jobs had not changed since the last one. Here a job's line is made once
per job object (jobs are frozen: a change is a new object) and reader's view (`private`),
and only the part a scheduling pass decides is made again when a new pass has decided:
- **The job's own part**: `api/wire.py`'s `job_to_wire` without the five keys a pass fills
  (`PASS_KEYS`), encoded once, keys sorted.
- **The pass's part** (`estimated_start`, `priority_factors`, `reservation`, `wait`, `why`),
  keys sorted, after it: a pending job's is made once per decision (`_said`), and the line
  is then kept whole until the job or the pass changes, so a request only looks lines up.
  (So the keys are sorted within each part, not across the two.)

`gpupool queue --json` writes the lines through, with no parse and no re-encode: a JSON
string holds no raw newline, so a line is one job.

Memory: one line per job and reader's view listed (~1.4 KB for a pending job), and for an
ended job (read from the store, which the engine no longer holds) its record too; all are
dropped together past `KEEP_BYTES` of them (a listing past that makes them again).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from gpupool.api.wire import factors_to_wire, job_to_wire, pass_to_wire, status_to_wire
from gpupool.core.job import Job, JobState
from gpupool.policy import Decision, Status
from gpupool.service.pool_service import Explanation

# The keys of a job's JSON that a scheduling pass fills (job_to_wire's `explain`), sorted.
PASS_KEYS = ("estimated_start", "priority_factors", "reservation", "wait", "why")
KEEP_BYTES = 64 * 1024 * 1024
# An ended job's record apart from its strings (objects, tuples, the spec), counted against
# KEEP_BYTES with them: the kept lines are then what holds it.
_RECORD_BYTES = 2048


class ListFormat(StrEnum):
    """How `GET /v1/jobs` answers: one JSON object (`json`), or `lines`
    (application/x-ndjson): the page's figures (`total`, `counts`, `offset`, `limit`) on the
    first line, then one job per line, each a job's JSON with its keys sorted."""

    JSON = "json"
    LINES = "lines"


# One encoder for all: json.dumps with any setting of its own makes a new encoder per call,
# which was most of the cost of encoding a pass's five small values.
_ENCODER = json.JSONEncoder(sort_keys=True)


def encode(value: object) -> str:
    """A value as the lines encode it (keys sorted, as the CLI's `print_json_list`)."""
    return _ENCODER.encode(value)


@dataclass(frozen=True, slots=True)
class _Kept:
    job: Job
    private: bool
    line: str  # its own part and the pass's, from `decision` (None: no pass's)
    own_length: int  # the length of its own part (its object without the closing brace)
    decision: Decision | None


class JobLines:
    """The lines, per job and reader's view, of one daemon. `explain(job_id, decision)`:
    what the pass said of a pending job; `log_path_of` and `gpu_count_of`: a job's log path and GPU count, each
    a function of the job alone while the daemon runs (its executors and its inventory are
    set when it starts: service/pool_service.py), so a kept line is not asked them again.
    Safe across the API's worker threads: entries are immutable and replaced whole (two
    requests may both make a line; the last one kept is as right as the other)."""

    def __init__(
        self,
        explain: Callable[[int, Decision], Explanation],
        log_path_of: Callable[[Job], str],
        gpu_count_of: Callable[[Job], float],
    ) -> None:
        self._explain = explain
        self._log_path_of, self._gpu_count_of = log_path_of, gpu_count_of
        self._kept: dict[tuple[int, bool], _Kept] = {}  # by (job id, private)
        # A status's `wait` and `why`, encoded, by its id (the entry holds it: no id reuse).
        self._statuses: dict[int, tuple[Status, str]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def kept_bytes(self) -> int:
        """About what the kept entries hold (`_held`), at most KEEP_BYTES."""
        return self._bytes

    def line(self, job: Job, private: bool, decision: Decision | None) -> str:
        """`job`'s line as a reader who may (`private`) or may not see its spec reads it,
        with what `decision` said of it if it is pending."""
        if job.state is not JobState.PENDING:
            decision = None  # a pass says nothing of it
        kept = self._kept.get((job.id, private))
        if kept is not None and (kept.job is job or _same(kept.job, job)):
            if kept.decision is decision:
                return kept.line
            own = kept.line[: kept.own_length]
        else:
            kept = None
            own = self._own(job, private)
        said = _NOTHING if decision is None else self._said(self._explain(job.id, decision))
        line = _joined(own, said)
        self._keep(_Kept(job, private, line, len(own), decision), kept)
        return line

    def _own(self, job: Job, private: bool) -> str:
        """The job's own part: its JSON without the keys a pass fills, nor its closing brace."""
        log_path, gpu_count = self._log_path_of(job), self._gpu_count_of(job)
        wire: dict[str, object] = dict(job_to_wire(job, None, log_path, gpu_count, private))
        for key in PASS_KEYS:
            del wire[key]
        return encode(wire)[:-1]

    def _said(self, explain: Explanation) -> str:
        """The pass's part, `encode(pass_to_wire(explain))` to the byte, made without the
        encoder's walk for its common pieces: a status's `wait` and `why` once per status
        object (a pass shares one between the jobs that wait alike), the factors' flat
        numbers by hand (tests/unit/test_job_lines.py holds it to the encoder)."""
        status = explain.status
        words = _NO_STATUS
        if status is not None:
            kept = self._statuses.get(id(status))
            if kept is None or kept[0] is not status:
                why, wait = status_to_wire(status)
                kept = (status, f'"wait": {encode(wait)}, "why": {encode(why)}')
                if len(self._statuses) >= _KEEP_STATUSES:
                    self._statuses.clear()
                self._statuses[id(status)] = kept
            words = kept[1]
        factors = factors_to_wire(explain.priority_factors)
        flat = "null" if factors is None else _flat(factors)
        where = explain.reservation
        held = "null" if where is None else encode(pass_to_wire(explain)["reservation"])
        start = _number(explain.estimated_start)
        return f'{{"estimated_start": {start}, "priority_factors": {flat}, "reservation": {held}, {words}}}'

    def _keep(self, kept: _Kept, replaced: _Kept | None) -> None:
        key = (kept.job.id, kept.private)
        size = _held(kept)
        with self._lock:
            if replaced is not None and self._kept.get(key) is replaced:
                self._bytes -= _held(replaced)
            if self._bytes + size > KEEP_BYTES:
                self._kept.clear()
                self._bytes = 0
            self._kept[key] = kept
            self._bytes += size


def _held(kept: _Kept) -> int:
    """About the bytes an entry holds: its line, and an ended job's record (an active job's
    the engine's view holds anyway), mostly its command and environments."""
    job = kept.job
    if not job.state.terminal:
        return len(kept.line)
    spec = job.spec
    texts = sum(len(k) + len(v) for k, v in (*spec.env, *spec.base_env))
    return len(kept.line) + _RECORD_BYTES + 2 * texts + sum(map(len, spec.command))


def _same(kept: Job, job: Job) -> bool:
    """An equal job read again from the store (its events compare apart)."""
    return kept == job and kept.events == job.events


def _joined(own: str, said: str) -> str:
    """The job's own part (`{...` without its brace) and the pass's (`{...}`) as one object."""
    return f"{own}, {said[1:]}"


def _number(value: object) -> str:
    """A number as the encoder writes it (float.__repr__ for a finite float, as it does)."""
    if value is None:
        return "null"
    if type(value) is float and math.isfinite(value):
        return float.__repr__(value)
    return encode(value)


def _flat(values: Mapping[str, object]) -> str:
    """An object of numbers, keys sorted, as the encoder writes it."""
    return "{" + ", ".join(f'"{k}": {_number(values[k])}' for k in sorted(values)) + "}"


_NOTHING = encode(pass_to_wire(None))
_NO_STATUS = '"wait": null, "why": ""'
_KEEP_STATUSES = 4096
