"""The order in which borrowers get idle GPUs (policy/quota.py): class by class (the class
stays a hard tier), then the project with the least borrowed per weight first, `(in use -
quota) / weight` (`QuotaBook.share`), queue order inside a project and between ties. As each
start raises its project's figure, idle GPUs go to borrowers roughly in proportion to their
weights.

`BorrowerQueue` is an iterator the pass draws from: each project's figure is read when its
next job is due, after the pass told the book what the previous job did (`QuotaBook.add`), so
a start counts at once. The pass stops drawing when nothing is free any more, and settles the
jobs not drawn (`untaken`, in queue order) without trying them.

A pass often takes only some of hundreds of borrowers before nothing is free, so a project's
next job is looked up when it is needed, not queued up front: with few projects, by a scan
(`list.index`, in C) from the one before; with many, where those scans would add up, from a
table of each job's next of its project.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from itertools import compress
from operator import attrgetter

from gpupool.policy.quota import NO_PROJECT, QuotaBook
from gpupool.policy.snapshot import PendingJob

_priority = attrgetter("priority")
_project = attrgetter("project")
_SCANNED_PROJECTS = 16  # up to this many projects in a class, `list.index` finds a next job


class BorrowerQueue:
    """The borrowers (`deferred`, in queue order) in the order they get idle GPUs."""

    def __init__(self, book: QuotaBook, deferred: list[PendingJob]) -> None:
        self.book = book
        self.deferred = deferred
        self.taken: list[int] = []  # places in `deferred` drawn so far

    def untaken(self) -> list[PendingJob]:
        """The borrowers not drawn, in queue order."""
        left = [True] * len(self.deferred)
        for t in self.taken:
            left[t] = False
        return list(compress(self.deferred, left))

    def __iter__(self) -> Iterator[PendingJob]:
        book, deferred, taken = self.book, self.deferred, self.taken
        in_use, projects = book.in_use, book.projects
        n = len(deferred)
        klasses = list(map(_priority, deferred))
        lo = 0
        while lo < n:
            klass, hi = klasses[lo], n
            if lo or klasses.count(klass) != n:  # more than one class: find where it ends
                hi = lo + 1
                while hi < n and klasses[hi] == klass:
                    hi += 1
            names = list(map(_project, deferred[lo:hi]))
            firsts = dict(zip(reversed(names), range(hi - lo - 1, -1, -1)))  # earliest wins
            after = None if len(firsts) <= _SCANNED_PROJECTS else _next_of_project(names)
            # (share, its next job's place, project): places differ, so names never compare
            heap = [(book.share(name), i, name) for name, i in firsts.items()]
            heapq.heapify(heap)
            while heap:
                _, i, name = heapq.heappop(heap)
                p = projects.get(name, NO_PROJECT)
                while True:  # this project's jobs, while it stays first
                    taken.append(lo + i)
                    yield deferred[lo + i]
                    if after is not None:
                        i = after[i]
                        if i < 0:
                            break
                    else:
                        try:
                            i = names.index(name, i + 1)
                        except ValueError:
                            break
                    if heap:
                        key = ((in_use.get(name, 0.0) - p.quota) / p.weight, i, name)  # share
                        if key > heap[0]:
                            heapq.heappush(heap, key)
                            break
            lo = hi


def _next_of_project(names: list[str]) -> list[int]:
    """For each place, the next place of the same project (-1: none)."""
    after = [-1] * len(names)
    last: dict[str, int] = {}
    for i in range(len(names) - 1, -1, -1):
        name = names[i]
        after[i] = last.get(name, -1)
        last[name] = i
    return after
