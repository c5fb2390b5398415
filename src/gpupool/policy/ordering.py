"""The order in which pending jobs are considered: multifactor priority.

`rank` is the one entry point: decide() and `gpupool queue --priority` both use it. It is a
simplified form of Slurm's multifactor priority plugin.

Jobs are ordered by the key

    (priority class, score, -submit_time, -id)      highest first

1. **Priority class** (`PendingJob.priority`: low 100 < normal 200 < high 300 < interactive 400,
   any int 0..1000) is a hard tier: a job of a higher class always comes before one of a lower
   class, whatever its other factors.
2. **Score**, inside a class: `w.fairshare * F + w.size * S + w.age * A + w.service * V`
   (added in that order), each factor in [0, 1], with the weights `w` of
   `PolicyConfig.weights`:

   - **F, fair share** (weight 10,000 by default): from the decayed GPU usage in
     `Snapshot.usage` (half-life `PolicyConfig.fairshare_half_life_s`, 7 days by default), two
     levels, project then user inside the project, each `2 ** (-U / S)` (U: the entity's
     fraction of its level's usage, S: its share; every project with pending or running jobs
     or usage has an equal share, and so does every such user inside its project), combined as
     `F = F_project * (0.5 + 0.5 * F_user)`. F is 1 with no usage at all, and lower the more
     the project, then the user, used (details in `gpupool.policy.fairshare`).
   - **V, service** (weight 10,000): less expected GPU-service first, Tiresias' two
     dimensions (GPUs x time) read from what LAS does not know, the time limit:
     `E = GPUs x time limit` (the policy's default limit for a job without one),
     `V = 1 - min(1, ln(1 + E/60) / ln(1 + w.service_max_gpu_s/60))`. A log scale, so a
     5-minute job is ahead of an hour's by as much as an hour's of a 12-hour one. Service
     already attained in earlier attempts is not counted: the daemon does not keep it per
     job, and the replay must decide as the daemon does (tests/unit/test_same_decisions.py);
     the restart bound (policy/victim_cost.py) keeps a requeued job from thrashing instead.
     On the shipped Philly trace it cuts the bounded slowdown of the default from 9.4 to 1.7
     (docs/scheduling-quality.md).
   - **A, age** (weight 1,000): `min(1, (now - submit_time) / w.age_max_s)`, 0 for a submit time
     in the future; it saturates after `age_max_s` (7 days by default).
   - **S, size** (weight 100): `gpus / the most GPUs of any node in the snapshot`, clipped to
     [0, 1] (0 for CPU-only jobs): bigger jobs are harder to start, so they get a slight edge.

   With the default weights fair share and service weigh alike, age next (one point every
   ~10 minutes of waiting), and size is worth at most about 17 hours of age.
3. **Submit time**, earliest first, then **id**, lowest first: the tie-breaks.

With no usage, equal ages and equal GPUs x limit this is priority, then size, then submit
order.

The other queue orders (`PolicyConfig.order`: fifo, sjf, srtf, las, drf) are the baselines of
`policy/orders.py`; `rank` hands them over there and reports each job's factors as zeros, with
`score` minus its place in that order (0 first, then -1, ...), so `gpupool queue --priority`,
which sorts by class then score, still lists the queue as it is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from math import log1p
from operator import attrgetter, itemgetter

from gpupool.policy import orders
from gpupool.policy.fairshare import fairshare_factors
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.snapshot import (
    PendingJob,
    PriorityFactors,
    PriorityWeights,
    RunningJob,
    Snapshot,
)

_project = attrgetter("project")
_user = attrgetter("user")
_pair = attrgetter("project", "user")
_place = itemgetter(-1)  # of a sort key: the job's place in `Snapshot.pending`

Raw = tuple[int, float, float, float, float, float]  # (class, fairshare, age, size, score, service)


class Factors(Mapping[int, PriorityFactors]):
    """Each pending job's priority factors, worked out when looked up: a pass ranks
    thousands of jobs, and only the few that are explained (`gpupool why`, `queue
    --priority`) are read; even a plain tuple per job, kept for them all, cost every pass a
    tuple and a dict entry per job. `raw` gives one job's, exactly as `rank` computed them
    to sort it."""

    __slots__ = ("_by_id", "_jobs", "_raw")

    def __init__(self, jobs: Sequence[PendingJob], raw: Callable[[PendingJob], Raw]) -> None:
        self._jobs, self._raw = jobs, raw
        self._by_id: dict[int, PendingJob] | None = None

    def _index(self) -> dict[int, PendingJob]:
        if self._by_id is None:
            self._by_id = {job.id: job for job in self._jobs}
        return self._by_id

    def __getitem__(self, job_id: int) -> PriorityFactors:
        klass, fairshare, age, size, score, service = self._raw(self._index()[job_id])
        return PriorityFactors(job_id, klass, fairshare, age, size, score, service)

    def __iter__(self) -> Iterator[int]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())


def rank(snapshot: Snapshot, now: float) -> tuple[list[PendingJob], Factors]:
    """Pending jobs best first, and the factors behind each one's place (module docstring).

    O(n log n) in the pending jobs: the fair-share factor is computed once per (project, user)
    and the size factor once per GPU count, then one sort on plain tuples.
    """
    if snapshot.config.order != "priority":
        return _by_order(snapshot, now)
    pending = snapshot.pending
    if not pending:
        return [], Factors((), _no_factors)
    weights = snapshot.config.weights
    w_fs, w_age, w_size, age_max = weights.fairshare, weights.age, weights.size, weights.age_max_s
    biggest = NodeFacts.of(snapshot.nodes).most_gpus
    size_of = [g / biggest for g in range(biggest + 1)] if biggest > 0 else [0.0]
    most = len(size_of) - 1

    def size(gpus: int) -> float:
        return size_of[gpus] if 0 <= gpus <= most else (1.0 if gpus > 0 and biggest > 0 else 0.0)

    def age(submit_time: float) -> float:
        waited = now - submit_time
        if waited <= 0.0:
            return 0.0
        if waited >= age_max:  # also age_max_s <= 0: saturated at once
            return 1.0
        return waited / age_max

    service = service_factor(weights, snapshot.config.default_time_limit_s)

    def raw(job: PendingJob) -> Raw:
        f, s, a = fairshare[job.project][job.user], size(job.resources.gpus), age(job.submit_time)
        v = service(job)
        return job.priority, f, a, s, w_fs * f + w_size * s + w_age * a + weights.service * v, v

    # `_sort_keys` is `raw` in line, with the products that do not depend on a job's age taken
    # out: it adds the same four products in the same order, so each score is the very float
    # `raw` gives.
    weighted_size = [w_size * s for s in size_of]
    # The factors from the running jobs' (project, user)s and the usage alone: the same as with
    # the pending jobs' too as long as each of those is already named, which the lookups in
    # `_sort_keys` check (KeyError otherwise); a walk over the queue saved.
    running = _pairs(snapshot.running)
    fairshare = _by_project(fairshare_factors(snapshot.usage, running))
    try:
        keyed = _sort_keys(
            pending, _times(w_fs, fairshare), weighted_size, size, now, weights, service
        )
    except KeyError:  # a (project, user) named by pending jobs only: it takes a share too
        fairshare = _by_project(fairshare_factors(snapshot.usage, running | _pairs(pending)))
        keyed = _sort_keys(
            pending, _times(w_fs, fairshare), weighted_size, size, now, weights, service
        )
    keyed.sort()
    return list(map(pending.__getitem__, map(_place, keyed))), Factors(pending, raw)


def _sort_keys(
    pending: Sequence[PendingJob],
    weighted: dict[str, dict[str, float]],
    weighted_size: list[float],
    size: Callable[[int], float],
    now: float,
    weights: PriorityWeights,
    service: Callable[[PendingJob], float],
) -> list[tuple[float | int, ...]]:
    """Each job's sort key, (-score, submit time, id, place) when all jobs have the same
    class (the usual queue: the comparisons are the same, less one per pair of keys), else
    (-class, -score, submit time, id, place). `weighted`: `w.fairshare * F` by project, then
    user; `weighted_size`: `w.size * S` by GPU count."""
    w_size, w_age, age_max, w_service = (
        weights.size,
        weights.age,
        weights.age_max_s,
        weights.service,
    )
    saturated = w_age * 1.0
    most = len(weighted_size) - 1
    klass, mixed = pending[0].priority, False
    keyed: list[tuple[float | int, ...]] = []
    append = keyed.append
    for index, job in enumerate(pending):
        gpus = job.resources.gpus
        if 0 <= gpus <= most:
            score = weighted[job.project][job.user] + weighted_size[gpus]
        else:
            score = weighted[job.project][job.user] + w_size * size(gpus)
        submit_time = job.submit_time
        waited = now - submit_time
        if waited <= 0.0:
            score += w_age * 0.0
        elif waited >= age_max:
            score += saturated
        else:
            score += w_age * (waited / age_max)
        score += w_service * service(job)
        if job.priority != klass:
            mixed = True
        append((-score, submit_time, job.id, index))
    if mixed:
        return [(-job.priority, *key) for job, key in zip(pending, keyed)]
    return keyed


def service_factor(
    weights: PriorityWeights, default_limit_s: float
) -> Callable[[PendingJob], float]:
    """V of the module docstring, for each job: remembered by (GPUs, limit),
    which a queue repeats (a sweep's jobs ask alike)."""
    scale = log1p(weights.service_max_gpu_s / 60.0) if weights.service_max_gpu_s > 0 else 0.0
    known: dict[tuple[float, float], float] = {}

    def factor(job: PendingJob) -> float:
        limit = job.time_limit_s if job.time_limit_s is not None else default_limit_s
        key = (orders.gpu_amount(job.resources), limit)
        got = known.get(key)
        if got is None:
            expected = max(0.0, key[0] * limit)  # submit refuses negative limits
            got = 1.0 - min(1.0, log1p(expected / 60.0) / scale) if scale > 0 else 0.0
            known[key] = got
        return got

    return factor


def _pairs(jobs: Sequence[PendingJob] | Sequence[RunningJob]) -> set[tuple[str, str]]:
    """Each (project, user) of `jobs`. With one user for all (or no users named: a replayed
    trace), from the projects alone: two sets of strings are built faster than one of pairs
    (no tuple per job), and the running jobs are many."""
    users = set(map(_user, jobs))
    if len(users) == 1:
        (user,) = users
        return {(project, user) for project in set(map(_project, jobs))}
    return set(map(_pair, jobs))


def _by_project(factors: dict[tuple[str, str], float]) -> dict[str, dict[str, float]]:
    """By project, then user: a job's is two lookups of strings, no pair built."""
    out: dict[str, dict[str, float]] = {}
    for (project, user), f in factors.items():
        out.setdefault(project, {})[user] = f
    return out


def _times(w: float, by_project: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each factor times the weight `w`."""
    return {p: {u: w * f for u, f in users.items()} for p, users in by_project.items()}


def _no_factors(job: PendingJob) -> Raw:
    raise KeyError(job.id)


def _by_order(snapshot: Snapshot, now: float) -> tuple[list[PendingJob], Factors]:
    """Another queue order (orders.py; ValueError for an unknown one), with its factors."""
    jobs = orders.ordered(snapshot, now)
    place = {job.id: p for p, job in enumerate(jobs)}
    return jobs, Factors(
        jobs, lambda job: (job.priority, 0.0, 0.0, 0.0, float(-place[job.id]), 0.0)
    )
