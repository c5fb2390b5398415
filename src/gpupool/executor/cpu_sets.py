"""The CPUs each running job of this executor is pinned to (`--cpus N`), as Slurm's
task/affinity: N CPUs of its own, chosen near its GPUs.

The policy counts CPUs per node (a job starts only where N are free); which ones is chosen
here, at launch: first free CPUs of the job's GPUs' NUMA node (the inventory's CPU affinity
of each GPU), then other free ones, and only when fewer than N are free, the least shared
ones. Two jobs share a CPU only when the machine has too few for both. Held until the run
is over (`release`); a restarted daemon takes them back from its running jobs' cgroups
(`hold`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence


class CpuSets:
    def __init__(self, machine_cpus: Sequence[int], gpu_cpus: Mapping[int, Sequence[int]]) -> None:
        self.machine = tuple(sorted(set(machine_cpus)))
        self.gpu_cpus = {g: frozenset(c) for g, c in gpu_cpus.items()}
        self._by_job: dict[int, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    def choose(self, job_id: int, count: int, gpus: Iterable[int]) -> tuple[int, ...]:
        """`count` CPUs for the job's run (its next attempt's replace its last), ascending."""
        with self._lock:
            self._by_job.pop(job_id, None)
            if count >= len(self.machine):
                chosen = self.machine
            else:
                chosen = self._pick(count, gpus)
            self._by_job[job_id] = chosen
            return chosen

    def _pick(self, count: int, gpus: Iterable[int]) -> tuple[int, ...]:
        near: set[int] = set()
        for g in gpus:
            near |= self.gpu_cpus.get(g, frozenset())
        load = dict.fromkeys(self.machine, 0)
        for cpus in self._by_job.values():
            for cpu in cpus:
                if cpu in load:
                    load[cpu] += 1
        # Least shared first; of those, the GPUs' own; then in order.
        ranked = sorted(self.machine, key=lambda c: (load[c], c not in near, c))
        return tuple(sorted(ranked[:count]))

    def hold(self, job_id: int, cpus: Iterable[int]) -> None:
        """A running job's CPUs, as found after a restart."""
        with self._lock:
            self._by_job[job_id] = tuple(sorted(set(cpus)))

    def release(self, job_id: int) -> None:
        with self._lock:
            self._by_job.pop(job_id, None)

    def held(self) -> dict[int, tuple[int, ...]]:
        with self._lock:
            return dict(self._by_job)
