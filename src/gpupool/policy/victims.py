"""Choosing victims: the one selector that quota reclaim (policy/reclaim.py) and order
preemption (policy/order_preemption.py) share. As in Kueue's preemption, victims are chosen
on the snapshot; stopping them is the engine's job.

Each caller orders its candidates (lowest priority or rank first) and says which may be taken
(reclaim: only while its project is above its quota; order preemption: only those that
rank behind the job). Then, on a `Fit` (what the job would have once the victims are gone):

1. `take_until_fit`: candidates in order, skipping those that give the job nothing it lacks,
   until it fits;
2. `fill_back`: every victim the fit does not need is dropped again, the last taken first, so
   no plan has a victim too many.

Three fits: `NodeFit` (one node: the feasibility chain of policy/filters/ on the node's free
view, with the reserved GPUs off limits), `CountFit` (one node, a request that counts GPUs
only where no GPU is shared: sums alone), and `WideFit` (policy/order_preemption.py: GPUs
across nodes for a job spread over several).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from gpupool.core.job import Resources
from gpupool.policy.filters import checks_for
from gpupool.policy.filters.gpu_type import matching_gpus
from gpupool.policy.node_free import NodeFree
from gpupool.policy.placement import Placement
from gpupool.policy.snapshot import RunningJob

V = TypeVar("V")
V_contra = TypeVar("V_contra", contravariant=True)
_NONE: frozenset[int] = frozenset()


class Fit(Protocol[V_contra]):
    """Whether a job fits once some victims are gone."""

    def helps(self, victim: V_contra) -> bool:
        """Whether stopping `victim` gives the job something it still lacks."""
        ...

    def give(self, victim: V_contra) -> None:
        """Count `victim` as gone."""
        ...

    def fits(self) -> bool:
        """Whether the job fits with every victim given so far gone."""
        ...

    def fits_with(self, victims: Sequence[V_contra]) -> bool:
        """Whether the job fits with exactly `victims` gone (nothing else given)."""
        ...


class Guard(Protocol[V_contra]):
    """A caller's rule on which candidates may be taken, as the victims so far stand."""

    def allows(self, victim: V_contra) -> bool: ...
    def took(self, victim: V_contra) -> None: ...


def take_until_fit(
    candidates: Iterable[V], fit: Fit[V], guard: Guard[V] | None = None
) -> tuple[list[V], bool]:
    """Candidates in order, those the guard allows and that help, until the job fits: the
    victims taken, and whether it fits."""
    chosen: list[V] = []
    for victim in candidates:
        if guard is not None and not guard.allows(victim):
            continue
        if not fit.helps(victim):
            continue
        fit.give(victim)
        chosen.append(victim)
        if guard is not None:
            guard.took(victim)
        if fit.fits():
            return chosen, True
    return chosen, False


def fill_back(chosen: list[V], fit: Fit[V]) -> list[V]:
    """Drop every victim the fit does not need, the last taken first."""
    for victim in reversed(list(chosen)):
        rest = [v for v in chosen if v is not victim]
        if fit.fits_with(rest):
            chosen = rest
    return chosen


def helps(r: RunningJob, view: NodeFree, res: Resources, wanted: set[int]) -> bool:
    """Whether preempting `r` gives the job something it lacks on this node."""
    if any(g in wanted and (res.fractional or g not in view.gpus) for g in r.gpus):
        return True
    short_cpus = res.cpus and view.cpus is not None and view.cpus < res.cpus
    short_mem = res.mem_bytes and view.mem_bytes is not None and view.mem_bytes < res.mem_bytes
    return bool((short_cpus and r.resources.cpus) or (short_mem and r.resources.mem_bytes))


def release(view: NodeFree, r: RunningJob, reserved: frozenset[int] = _NONE) -> None:
    """Count `r` as gone from `view`, the `reserved` GPUs kept off limits."""
    view.give(tuple(g for g in r.gpus if g not in reserved), r.resources, r.gpu_memory_bytes)


class NodeFit:
    """A job on one node as victims there go: the chain of checks on a copy of the node's
    free view (`base`), with `reserved` GPUs never given back."""

    def __init__(self, base: NodeFree, res: Resources, reserved: frozenset[int] = _NONE) -> None:
        self.base, self.res, self.reserved = base, res, reserved
        self.wanted = set(matching_gpus(base.node, res)) - reserved
        self.checks = checks_for(res)
        self.view = base.copy()

    def helps(self, victim: RunningJob) -> bool:
        return helps(victim, self.view, self.res, self.wanted)

    def give(self, victim: RunningJob) -> None:
        release(self.view, victim, self.reserved)

    def fits(self) -> bool:
        view, res = self.view, self.res
        return all(check(view, res) is None for check in self.checks)

    def view_with(self, victims: Sequence[RunningJob]) -> NodeFree:
        """The node as it would be with `victims` gone."""
        view = self.base.copy()
        for v in victims:
            release(view, v, self.reserved)
        return view

    def fits_with(self, victims: Sequence[RunningJob]) -> bool:
        view, res = self.view_with(victims), self.res
        return all(check(view, res) is None for check in self.checks)


class CountFit:
    """`NodeFit` for a request that counts GPUs only, on a node without shared GPUs: the job
    lacks `lack` GPUs, and every candidate's GPUs count."""

    def __init__(self, lack: int) -> None:
        self.lack, self.got = lack, 0

    def helps(self, victim: RunningJob) -> bool:
        return True

    def give(self, victim: RunningJob) -> None:
        self.got += len(victim.gpus)

    def fits(self) -> bool:
        return self.got >= self.lack

    def fits_with(self, victims: Sequence[RunningJob]) -> bool:
        return sum(len(v.gpus) for v in victims) >= self.lack


@dataclass(frozen=True)
class Plan:
    placement: Placement  # where the job will run once the victims are gone
    victims: tuple[RunningJob, ...]
    held: Placement  # the part of `placement` that is free now: held for it from now on
    held_res: Resources  # with the CPUs and memory held now


def hold(
    res: Resources, placement: Placement, victims: tuple[RunningJob, ...], free: NodeFree
) -> Plan:
    """What to hold now for a job that starts once `victims` are gone: the placement's GPUs
    that are free (or shared) now, and the CPUs and memory the victims do not give back."""
    if res.fractional:
        held = tuple(g for g in placement.gpus if free.room(g) is not None)
    else:
        held = tuple(g for g in placement.gpus if g in free.gpus)
    cpus = res.cpus
    if cpus and free.cpus is not None:
        cpus = min(free.cpus, max(0, cpus - sum(v.resources.cpus or 0 for v in victims)))
    mem = res.mem_bytes
    if mem and free.mem_bytes is not None:
        mem = min(free.mem_bytes, max(0, mem - sum(v.resources.mem_bytes or 0 for v in victims)))
    held_res = replace(res, cpus=cpus, mem_bytes=mem)
    return Plan(placement, victims, Placement(placement.node, held), held_res)
