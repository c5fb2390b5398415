"""The order in which pending jobs are considered: multifactor priority.

`rank` is the one entry point: decide() and `gpupool queue --priority` both use it. It is a
simplified form of Slurm's multifactor priority plugin.

Jobs are ordered by the key

    (priority class, score, -submit_time, -id)      highest first

1. **Priority class** (`PendingJob.priority`: low 100 < normal 200 < high 300 < interactive 400,
   any int 0..1000) is a hard tier: a job of a higher class always comes before one of a lower
   class, whatever its other factors.
2. **Score**, inside a class: `w.fairshare * F + w.age * A + w.size * S`, each factor in [0, 1],
   with the weights `w` of `PolicyConfig.weights`:

   - **F, fair share** (weight 10,000 by default): from the decayed GPU usage in
     `Snapshot.usage` (half-life `PolicyConfig.fairshare_half_life_s`, 7 days by default), two
     levels, project then user inside the project, each `2 ** (-U / S)` (U: the entity's
     fraction of its level's usage, S: its share; every project with pending or running jobs
     or usage has an equal share, and so does every such user inside its project), combined as
     `F = F_project * (0.5 + 0.5 * F_user)`. F is 1 with no usage at all, and lower the more
     the project, then the user, used (details in `gpupool.policy.fairshare`).
   - **A, age** (weight 1,000): `min(1, (now - submit_time) / w.age_max_s)`, 0 for a submit time
     in the future; it saturates after `age_max_s` (7 days by default).
   - **S, size** (weight 100): `gpus / the most GPUs of any node in the snapshot`, clipped to
     [0, 1] (0 for CPU-only jobs): bigger jobs are harder to start, so they get a slight edge.

   With the default weights fair share dominates, age next (one point every ~10 minutes of
   waiting), and size is worth at most about 17 hours of age.
3. **Submit time**, earliest first, then **id**, lowest first: the tie-breaks.

With no usage and equal ages this is priority, then size, then submit order.

The other queue orders (`PolicyConfig.order`: fifo, sjf, srtf, las, drf) are the baselines of
`policy/orders.py`; `rank` hands them over there and reports each job's factors as zeros, with
`score` minus its place in that order (0 first, then -1, ...), so `gpupool queue --priority`,
which sorts by class then score, still lists the queue as it is taken.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from operator import attrgetter

from gpupool.policy import orders
from gpupool.policy.fairshare import fairshare_factors
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.snapshot import PendingJob, PriorityFactors, Snapshot

_project = attrgetter("project")
_user = attrgetter("user")


class Factors(Mapping[int, PriorityFactors]):
    """Each pending job's priority factors, built when looked up: a pass ranks thousands of
    jobs, and only the few that are explained (`gpupool why`, `queue --priority`) are read;
    building them all was a third of `rank`'s time."""

    __slots__ = ("_raw",)

    def __init__(self, raw: dict[int, tuple[int, float, float, float, float]]) -> None:
        self._raw = raw  # job id -> (class, fairshare, age, size, score)

    def __getitem__(self, job_id: int) -> PriorityFactors:
        klass, fairshare, age, size, score = self._raw[job_id]
        return PriorityFactors(job_id, klass, fairshare, age, size, score)

    def __iter__(self) -> Iterator[int]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def rank(snapshot: Snapshot, now: float) -> tuple[list[PendingJob], Factors]:
    """Pending jobs best first, and the factors behind each one's place (module docstring).

    O(n log n) in the pending jobs: the fair-share factor is computed once per (project, user)
    and the size factor once per GPU count, then one sort on plain tuples.
    """
    if snapshot.config.order != "priority":
        return _by_order(snapshot, now)
    pending = snapshot.pending
    if not pending:
        return [], Factors({})
    weights = snapshot.config.weights
    w_fs, w_age, w_size, age_max = weights.fairshare, weights.age, weights.size, weights.age_max_s

    active = {(j.project, j.user) for j in pending}
    active.update(zip(map(_project, snapshot.running), map(_user, snapshot.running)))
    fairshare: dict[str, dict[str, float]] = {}
    for (project, user), f in fairshare_factors(snapshot.usage, active).items():
        fairshare.setdefault(project, {})[user] = f
    biggest = NodeFacts.of(snapshot.nodes).most_gpus
    size_of = [g / biggest for g in range(biggest + 1)] if biggest > 0 else [0.0]
    most = len(size_of) - 1

    keyed: list[tuple[int, float, float, int, int]] = []
    append = keyed.append
    factors: dict[int, tuple[int, float, float, float, float]] = {}
    for index, job in enumerate(pending):
        job_id, klass = job.id, job.priority
        f = fairshare[job.project][job.user]
        gpus = job.resources.gpus
        s = size_of[gpus] if 0 <= gpus <= most else (1.0 if gpus > 0 and biggest > 0 else 0.0)
        waited = now - job.submit_time
        if waited <= 0.0:
            a = 0.0
        elif waited >= age_max:  # also age_max_s <= 0: saturated at once
            a = 1.0
        else:
            a = waited / age_max
        score = w_fs * f + w_size * s + w_age * a
        append((-klass, -score, job.submit_time, job_id, index))
        factors[job_id] = (klass, f, a, s, score)
    keyed.sort()
    return [pending[k[4]] for k in keyed], Factors(factors)


def _by_order(snapshot: Snapshot, now: float) -> tuple[list[PendingJob], Factors]:
    """Another queue order (orders.py; ValueError for an unknown one), with its factors."""
    jobs = orders.ordered(snapshot, now)
    return jobs, Factors(
        {job.id: (job.priority, 0.0, 0.0, 0.0, float(-place)) for place, job in enumerate(jobs)}
    )
