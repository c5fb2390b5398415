"""Draining and resuming GPUs (PoolService's drain methods; core/drain.py, policy/drains.py):
the GPUs a request names, checked against the inventory; kept in the store, told to the
engine (its next pass keeps them empty), a drain `now` requeueing the jobs running there.

Who may is the API's check (pool admins only: core/access.py `MANAGE_GPUS`); each change is
in the audit log (api/drains.py) and the daemon's log (here).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpupool.core.drain import REASON_MAX, DrainedGpu
from gpupool.core.job import JobState
from gpupool.service.refusal import RequestRefused

if TYPE_CHECKING:
    from gpupool.core.hardware import Inventory
    from gpupool.service.pool_service import EngineLink
    from gpupool.service.store_contracts import PoolStore

log = logging.getLogger("gpupool.drains")


class InvalidDrain(RequestRefused):
    """A drain or resume that names no GPU of the pool, or an unusable reason (422)."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_drain", message)


@dataclass(frozen=True)
class Drained:
    """What a drain did: the GPUs drained (as kept) and the jobs it requeues (`now`)."""

    gpus: tuple[DrainedGpu, ...]
    requeued: tuple[int, ...] = ()


def gpus_named(inventory: Inventory, node: str | None, gpu: int | None) -> list[tuple[str, int]]:
    """The (node, GPU) pairs a request names: every GPU of `node`, or its GPU `gpu`; with no
    node, the pool's one node (InvalidDrain names the nodes when there are several)."""
    names = [n.name for n in inventory.nodes]
    if node is None:
        if len(names) != 1:
            raise InvalidDrain(f"name the node: this pool has {len(names)} ({', '.join(names)})")
        node = names[0]
    found = next((n for n in inventory.nodes if n.name == node), None)
    if found is None:
        raise InvalidDrain(f"no node {node!r} in this pool (its nodes: {', '.join(names)})")
    indices = sorted(g.index for g in found.gpus)
    if gpu is None:
        if not indices:
            raise InvalidDrain(f"node {node} has no GPUs to drain")
        return [(node, g) for g in indices]
    if gpu not in indices:
        have = ", ".join(map(str, indices)) or "none"
        raise InvalidDrain(f"node {node} has no GPU {gpu} (its GPUs: {have})")
    return [(node, gpu)]


def checked_reason(reason: str) -> str:
    """An admin's reason as kept: one line of printable text, at most REASON_MAX long."""
    text = reason.strip()
    if len(text) > REASON_MAX:
        raise InvalidDrain(f"the reason is {len(text)} characters long: at most {REASON_MAX}")
    if not text.isprintable():
        raise InvalidDrain("the reason must be one line of printable text")
    return text


def where(keys: list[tuple[str, int]]) -> str:
    """'node a GPU 3', 'node a GPUs 0, 1', or several nodes: the words for log lines."""
    nodes = sorted({n for n, _ in keys})
    parts = []
    for n in nodes:
        gs = [str(g) for m, g in keys if m == n]
        parts.append(f"node {n} GPU{'s' if len(gs) > 1 else ''} {', '.join(gs)}")
    return "; ".join(parts)


class DrainMethods:
    """PoolService's drain methods; PoolService provides `store`, `engine`, `inventory`."""

    store: PoolStore
    engine: EngineLink
    inventory: Inventory
    # The drained GPUs as this service last wrote or read them: /v1/gpus and /metrics read
    # them at every call without going to the store (only this service changes them).
    _drained: dict[tuple[str, int], DrainedGpu] | None = None

    def drains(self) -> list[DrainedGpu]:
        """Every drained GPU, in (node, GPU) order."""
        return sorted(self.drained_by_key().values(), key=lambda d: d.key)

    def drained_by_key(self) -> dict[tuple[str, int], DrainedGpu]:
        if self._drained is None:
            self._drained = {d.key: d for d in self.store.drained_gpus()}
        return self._drained

    def _drains_changed(self) -> None:
        drains = self.store.drained_gpus()
        self._drained = {d.key: d for d in drains}
        self.engine.drains_changed(drains)

    def drain(
        self,
        by: str,
        node: str | None,
        gpu: int | None,
        at: float,
        reason: str = "",
        now: bool = False,
    ) -> Drained:
        """Drain `node`'s GPUs (or its one GPU `gpu`) at time `at`: no job starts there from
        the next pass on; with `now`, the jobs running there are requeued as a preemption
        is (SIGTERM, their grace period, back to the queue), else they run to their end."""
        keys = gpus_named(self.inventory, node, gpu)
        text = checked_reason(reason)
        kept = self.store.drain_gpus(keys, text, by, at)
        self._drains_changed()
        said = f": {text}" if text else ""
        log.info("%s drained by %s%s", where(keys), by, said)
        requeued: list[int] = []
        if now:
            on = set(keys)
            for job in self.engine.view().jobs.values():
                if job.state is not JobState.RUNNING or job.spec.backend is not None:
                    continue
                if any((job.node, g) in on for g in job.gpus):
                    why = f"its GPUs were drained now by {by}{said}"
                    self.engine.preempt(job.id, why)
                    requeued.append(job.id)
        return Drained(tuple(kept), tuple(sorted(requeued)))

    def resume(self, node: str | None, gpu: int | None) -> list[DrainedGpu]:
        """Resume `node`'s drained GPUs (or its GPU `gpu`): jobs may start there again. The
        drains that were there (none: nothing was drained)."""
        keys = gpus_named(self.inventory, node, gpu)
        gone = self.store.resume_gpus(keys)
        if gone:
            self._drains_changed()
            log.info("%s resumed", where([d.key for d in gone]))
        return gone
