"""Which job ids the waiting jobs name in their `--after`, counted: what of the ended jobs'
records the engine must keep in memory (engine/gating.py `EndedJobs`; issue 35, goal 8).

A waiting job's names change when it is stored again (its --after edited, or it starts or
ends: then it names nothing); `name` takes its whole list each time, so the counts stay
right whatever changed."""

from __future__ import annotations


class NamedJobs:
    """Job ids named by the waiting jobs' --after, each with how many name it."""

    __slots__ = ("_counts", "_names_of")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._names_of: dict[int, tuple[int, ...]] = {}  # each waiting job's names

    def __contains__(self, job_id: int) -> bool:
        return job_id in self._counts

    def name(self, job_id: int, names: tuple[int, ...]) -> None:
        """`job_id` names `names` from now on (() once it no longer waits)."""
        before = self._names_of.get(job_id, ())
        if names == before:
            return
        counts = self._counts
        for name in before:
            if counts[name] == 1:
                del counts[name]
            else:
                counts[name] -= 1
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        if names:
            self._names_of[job_id] = names
        else:
            self._names_of.pop(job_id, None)
