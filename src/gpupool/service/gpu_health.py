"""GPU health (PoolService's health methods; core/gpu_health.py, store/gpu_health.py): the
events NVML reported, kept, and each GPU's state as `gpupool health` and /v1/health show it.

The monitor (monitor/nvml_health.py) reads the events and hands them to `record_health`;
what the daemon does about a GPU fault (drains the GPU, as HEALTH_DRAINER) is its own.
Here: keeping them, a line in the daemon's log for each fault, and the states.

A GPU's state (`health_states`, a pure function of what it is given):
- "failed": drained by HEALTH_DRAINER (a GPU fault drained it; `gpupool resume` once fixed);
- "drained": drained by an admin;
- "degraded": not drained, but it had a GPU fault or was throttled in the last hour;
- "ok": none of these.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from gpupool.core.drain import DrainedGpu
from gpupool.core.gpu_health import HEALTH_DRAINER, Fault, HealthEvent, HealthKind
from gpupool.store.gpu_health import KEEP_PER_GPU

if TYPE_CHECKING:
    from gpupool.core.hardware import Inventory
    from gpupool.service.store_contracts import PoolStore

log = logging.getLogger("gpupool.health")

RECENT_S = 3600.0  # a GPU fault or throttle this recent makes a GPU "degraded"
LAST_EVENTS = 10  # events shown per GPU


class HealthState(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"  # a GPU fault or a throttle in the last hour, not drained
    DRAINED = "drained"  # by an admin
    FAILED = "failed"  # drained by HEALTH_DRAINER for a GPU fault


@dataclass(frozen=True, slots=True)
class GpuHealth:
    """One GPU of the inventory: its state, its drain if any, its last events (newest
    first)."""

    node: str
    gpu: int
    state: HealthState
    drained: DrainedGpu | None
    events: tuple[HealthEvent, ...]

    @property
    def key(self) -> tuple[str, int]:
        return (self.node, self.gpu)


def degrades(event: HealthEvent) -> bool:
    """Whether `event` makes its GPU "degraded" while recent: a GPU fault or a throttle."""
    return event.fault is Fault.GPU or event.kind is HealthKind.THROTTLE


def health_states(
    inventory: Inventory,
    drains: Mapping[tuple[str, int], DrainedGpu],
    events: Iterable[HealthEvent],
    now: float,
) -> list[GpuHealth]:
    """Each GPU of `inventory`, in (node, index) order, with its state (module docstring)
    from its drain and those of `events` since `now - RECENT_S`, and its last LAST_EVENTS
    events of `events`. Events of GPUs not in the inventory are left out."""
    by_gpu: dict[tuple[str, int], list[HealthEvent]] = {}
    for e in events:
        by_gpu.setdefault(e.key, []).append(e)
    out = []
    for node in sorted(inventory.nodes, key=lambda n: n.name):
        for index in sorted(g.index for g in node.gpus):
            key = (node.name, index)
            mine = sorted(by_gpu.get(key, ()), key=lambda e: e.time, reverse=True)
            drain = drains.get(key)
            if drain is not None:
                failed = drain.by == HEALTH_DRAINER
                state = HealthState.FAILED if failed else HealthState.DRAINED
            elif any(degrades(e) and e.time >= now - RECENT_S for e in mine):
                state = HealthState.DEGRADED
            else:
                state = HealthState.OK
            out.append(GpuHealth(node.name, index, state, drain, tuple(mine[:LAST_EVENTS])))
    return out


def fault_line(event: HealthEvent) -> str:
    """'node a GPU 3: XID 79: GPU has fallen off the bus', as the daemon's log says it."""
    return f"node {event.node} GPU {event.gpu}: {event.detail}"


class HealthMethods:
    """PoolService's health methods; PoolService provides `store`, `inventory` and
    `drained_by_key` (service/drains.py)."""

    store: PoolStore
    inventory: Inventory

    if TYPE_CHECKING:

        def drained_by_key(self) -> dict[tuple[str, int], DrainedGpu]: ...

    def record_health(self, events: Sequence[HealthEvent]) -> None:
        """Keep `events` (one transaction; the store keeps each GPU's newest 10,000); each
        GPU or job fault is a WARNING line in the daemon's log."""
        if not events:
            return
        self.store.record_health(events)
        for e in events:
            if e.fault is not Fault.NONE:
                log.warning("%s", fault_line(e))

    def health(self, now: float) -> list[GpuHealth]:
        """Each GPU of the inventory, in (node, index) order, with its state at `now` and
        its last events (`health_states`)."""
        since = now - RECENT_S
        events: list[HealthEvent] = []
        for node in self.inventory.nodes:
            for g in node.gpus:
                key = (node.name, g.index)
                last = self.store.health_events(limit=LAST_EVENTS, gpu=key)
                if (
                    len(last) == LAST_EVENTS
                    and last[-1].time >= since
                    and not any(degrades(e) for e in last)
                ):
                    # Its last events are all of the last hour and none degrades it: one
                    # before them may, so read the whole hour.
                    last = self.store.health_events(since, limit=KEEP_PER_GPU, gpu=key)
                events.extend(last)
        return health_states(self.inventory, self.drained_by_key(), events, now)
