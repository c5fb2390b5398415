"""The replay's count of GPUs idle while a job that could use them waited, by cause, by the
rule the daemon counts by (policy/idle_waiting.py).

The replay tells the meter which jobs wait (`waiting`, `left`), the statuses each pass gives
them (`passed`), and, at every event time, how long the state it last saw held (`account`)
and what is free now (`refresh`). Between two event times nothing changes, so the rate set
after one holds until the next. Waiting jobs are kept as counts by (hold, GPUs, whole), so a
refresh costs the distinct requests, not the queue's length.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from gpupool.policy.idle_waiting import (
    Hold,
    IdleCause,
    add_rate,
    hold_of,
    idle_cause,
    idle_rate,
)
from gpupool.policy.status import Status

_Key = tuple[Hold | None, float, bool]  # (hold, GPUs asked, whole GPUs)


class IdleMeter:
    def __init__(self) -> None:
        self._of: dict[int, _Key] = {}
        self._counts: Counter[_Key] = Counter()
        self._rate: dict[IdleCause, float] = {}
        self._since: float | None = None
        self.gpu_s: dict[IdleCause, float] = {}  # GPU-seconds idle while jobs waited

    def waiting(self, job_id: int, gpus: float, whole: bool) -> None:
        """Job `job_id` (re)joins the queue; no pass has looked at it yet."""
        self._set(job_id, (Hold.OTHER, gpus, whole))

    def left(self, job_id: int) -> None:
        """Job `job_id` left the queue (it started)."""
        key = self._of.pop(job_id)
        self._counts[key] -= 1
        if not self._counts[key]:
            del self._counts[key]

    def passed(self, statuses: Mapping[int, Status]) -> None:
        """A pass said why these jobs wait."""
        of = self._of
        for job_id, status in statuses.items():
            key = of.get(job_id)
            if key is not None:
                hold = hold_of(status)
                if hold is not key[0]:
                    self._set(job_id, (hold, key[1], key[2]))

    def account(self, now: float) -> None:
        """The rate last set held until `now`."""
        if self._since is not None:
            add_rate(self.gpu_s, self._rate, now - self._since)
        self._since = now

    def refresh(self, free_gpus: float, free_on: Mapping[str, int]) -> None:
        """Set the rate from the jobs waiting now and the GPUs free now (`free_on`: whole
        free GPUs by node)."""
        if not self._counts or free_gpus <= 0:
            self._rate = {}
            return
        most = float(max(free_on.values(), default=0))
        asks = []
        for (hold, gpus, whole), n in self._counts.items():
            if hold is None:
                continue
            cause = idle_cause(hold, gpus, whole, free_gpus, most)
            if cause is not None:
                asks.append((cause, gpus * n))
        self._rate = idle_rate(asks, free_gpus)

    def by_cause(self) -> dict[str, float]:
        """GPU-seconds by cause name, every cause present (0 where none)."""
        return {c.value: self.gpu_s.get(c, 0.0) for c in IdleCause}

    def _set(self, job_id: int, key: _Key) -> None:
        old = self._of.get(job_id)
        if old is not None:
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old]
        self._of[job_id] = key
        self._counts[key] += 1
