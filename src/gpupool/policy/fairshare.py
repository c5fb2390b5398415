"""Fair share: decayed GPU usage, and the fair-share factor it gives each (project, user).

Usage decays exponentially with a half-life, as Slurm's `PriorityDecayHalfLife` does: a
GPU-second used `h` seconds ago (`h = PolicyConfig.fairshare_half_life_s`, 7 days by default)
counts half as much as one used now. A job that held `g` GPUs from `start` to `end` has used,
as seen at time `now`,

    usage = integral over t in [start, min(end, now)] of g * 2 ** (-(now - t) / h) dt
          = g * h / ln 2 * (2 ** (-(now - b) / h) - 2 ** (-(now - start) / h)),  b = min(end, now)

(0 when the interval is empty or lies in the future; a running job, `end` None, counts up to
`now`; `h` infinite means no decay, plain GPU-seconds). Usage is a sum of such terms, so decaying
it by one more half-life halves it.

The daemon and the simulator turn their job history into `UsageInterval`s, sum them with
`decayed_usage`, and put the result in `Snapshot.usage`; the policy reads only that.

The fair-share factor (Slurm's classic multifactor form, two levels, no configured quotas):

    F_level = 2 ** (-U / S)

where `S` is the entity's normalized share and `U` its fraction of the decayed usage at its level
(0 when nobody there used anything). Every project that has pending or running jobs, or usage,
in the snapshot has an equal share, `S = 1 / number of such projects`, and `U = its usage / all
projects' usage`. Inside a project every user with pending or running jobs or usage there has an
equal share of the project, `S = 1 / number of such users`, and `U = their usage / the project's
users' usage`. A job's factor combines both levels:

    F = F_project * (0.5 + 0.5 * F_user)        in (0, 1]

so the project's standing weighs most (the user level moves F by at most a factor 2, as much as
the project using one more fair share's worth), and inside one project only the user level
differs. An entity that used nothing has F_level = 1, one that used exactly its share 0.5.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpupool.policy.snapshot import Usage

_LN2 = math.log(2.0)


@dataclass(frozen=True)
class UsageInterval:
    """`gpus` GPUs held by one job of `user` in `project` from `start` to `end` (None: still
    running). Times are epoch seconds."""

    project: str
    user: str
    gpus: float
    start: float
    end: float | None = None


def decayed_gpu_seconds(
    gpus: float, start: float, end: float, now: float, half_life_s: float
) -> float:
    """The exact integral of `gpus * 2 ** (-(now - t) / half_life_s)` over
    `[start, min(end, now)]`: GPU-seconds, each weighted by how long ago it was used.

    0 for an empty or future interval. `half_life_s` must be positive; `math.inf` means no decay.
    """
    if not half_life_s > 0.0:
        raise ValueError(f"half_life_s must be positive: {half_life_s}")
    stop = min(end, now)
    length = stop - start
    if not length > 0.0:
        return 0.0
    if math.isinf(half_life_s):
        return gpus * length
    # 2**(-(now-stop)/h) * (1 - 2**(-length/h)) * h/ln2, with expm1 so that short intervals
    # (or long half-lives) keep their precision.
    rate = _LN2 / half_life_s
    return gpus * math.exp(-(now - stop) * rate) * -math.expm1(-length * rate) / rate


def decayed_usage(intervals: Iterable[UsageInterval], now: float, half_life_s: float) -> Usage:
    """Decayed GPU-seconds per project and per (project, user), summed over `intervals`.

    Entities whose usage is 0 (only future or empty intervals) are left out. The sums are exact
    (math.fsum), so the result does not depend on the order of `intervals`.
    """
    by_user: dict[tuple[str, str], list[float]] = {}
    for iv in intervals:
        end = now if iv.end is None else iv.end
        used = decayed_gpu_seconds(iv.gpus, iv.start, end, now, half_life_s)
        if used > 0.0:
            by_user.setdefault((iv.project, iv.user), []).append(used)
    users = {key: math.fsum(parts) for key, parts in sorted(by_user.items())}
    by_project: dict[str, list[float]] = {}
    for (project, _user), parts in sorted(by_user.items()):
        by_project.setdefault(project, []).extend(parts)
    projects = {p: math.fsum(parts) for p, parts in by_project.items()}
    return Usage(by_project=projects, by_user=users)


def fairshare_factors(
    usage: Usage, active: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], float]:
    """The fair-share factor F of every (project, user) in `active` (those with pending or
    running jobs), by the two-level formula in the module docstring.

    Shares come only from `active` and the entities with positive usage, so the result is a
    pure function of the snapshot. A project missing from `usage.by_project` counts the sum of
    its users' usage.
    """
    users_of: dict[str, set[str]] = {}
    for project, user in active:
        users_of.setdefault(project, set()).add(user)
    user_usage: dict[str, dict[str, float]] = {}
    for (project, user), used in usage.by_user.items():
        if used > 0.0:
            user_usage.setdefault(project, {})[user] = used
            users_of.setdefault(project, set()).add(user)
    project_usage = _positive(usage.by_project)
    for project in project_usage:
        users_of.setdefault(project, set())
    for project in users_of:
        if project not in project_usage and project in user_usage:
            project_usage[project] = math.fsum(user_usage[project].values())

    projects = sorted(users_of)
    total = math.fsum(project_usage.get(p, 0.0) for p in projects)
    factors: dict[tuple[str, str], float] = {}
    for project in projects:
        f_project = _level_factor(project_usage.get(project, 0.0), total, len(projects))
        used_by = user_usage.get(project, {})
        users = sorted(users_of[project])
        project_total = math.fsum(used_by.get(u, 0.0) for u in users)
        for user in users:
            f_user = _level_factor(used_by.get(user, 0.0), project_total, len(users))
            factors[(project, user)] = f_project * (0.5 + 0.5 * f_user)
    return factors


def _level_factor(used: float, total: float, entities: int) -> float:
    """2 ** (-U / S) with U = used / total (0 if total is 0) and S = 1 / entities."""
    if total <= 0.0 or used <= 0.0:
        return 1.0
    return float(2.0 ** (-(used / total) * entities))


def _positive(values: Mapping[str, float]) -> dict[str, float]:
    return {k: v for k, v in values.items() if v > 0.0}
