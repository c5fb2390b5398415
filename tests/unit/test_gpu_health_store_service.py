"""GPU health events kept in the store (store/gpu_health.py, on SQLite and PostgreSQL: newest
first, each GPU's newest KEEP_PER_GPU), and the service's side (service/gpu_health.py): the
states from drains and recent events, the last events per GPU, and a log line per fault."""

from __future__ import annotations

import logging

import pytest
from test_store import store_fixture, store_url_fixture  # noqa: F401  (fixtures)

import gpupool.store.gpu_health as store_health
from gpupool.core.drain import DrainedGpu
from gpupool.core.gpu_health import (
    HEALTH_DRAINER,
    Fault,
    HealthEvent,
    HealthKind,
    health_event,
    xid_event,
)
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.service import PoolService
from gpupool.service.drains import DrainMethods
from gpupool.service.gpu_health import (
    LAST_EVENTS,
    RECENT_S,
    GpuHealth,
    HealthMethods,
    HealthState,
    fault_line,
    health_states,
)
from gpupool.store import Store

GIB = 1 << 30
NOW = 1_790_000_000.0


def _node(name: str, count: int) -> Node:
    return Node(name, tuple(Gpu(i, "A100-80GB", 80 * GIB) for i in range(count)))


POOL = Inventory((_node("b", 1), _node("a", 4)), "declared")


def throttle(node: str, gpu: int, time: float) -> HealthEvent:
    return health_event(node, gpu, time, HealthKind.THROTTLE, "clocks slowed: thermal")


# -- the store ----------------------------------------------------------------------------
def test_events_round_trip_newest_first_since_a_time_and_by_gpu(store: Store) -> None:
    assert store.health_events() == []
    store.record_health([])  # nothing to do
    lost = health_event("a", 3, 100.0, HealthKind.LOST, "GPU has fallen off the bus")
    events = [
        xid_event("a", 3, 50.0, 79),
        lost,
        xid_event("a", 1, 75.0, 13),
        throttle("b", 0, 75.0),
    ]
    store.record_health(events)
    got = store.health_events()
    # Newest first; at one time, the later written first.
    assert got == [lost, throttle("b", 0, 75.0), xid_event("a", 1, 75.0, 13), events[0]]
    assert got[0].kind is HealthKind.LOST and got[0].fault is Fault.GPU and got[0].code is None
    assert got[2].code == 13 and got[2].fault is Fault.JOB
    assert store.health_events(since=75.0) == got[:3]
    assert store.health_events(limit=2) == got[:2]
    assert store.health_events(gpu=("a", 3)) == [lost, events[0]]
    assert store.health_events(gpu=("a", 2)) == []


def test_each_gpu_keeps_only_its_newest_rows(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_health, "KEEP_PER_GPU", 5)
    store.record_health([throttle("a", 0, float(t)) for t in range(4)])
    store.record_health([xid_event("a", 1, 1.0, 79)])  # another GPU: its own count
    store.record_health([throttle("a", 0, float(t)) for t in range(4, 9)])
    assert [e.time for e in store.health_events(gpu=("a", 0))] == [8.0, 7.0, 6.0, 5.0, 4.0]
    assert store.health_events(gpu=("a", 1)) == [xid_event("a", 1, 1.0, 79)]
    # One written late with an old time is the oldest: it goes, not a newer one.
    store.record_health([throttle("a", 0, 0.5)])
    assert [e.time for e in store.health_events(gpu=("a", 0))] == [8.0, 7.0, 6.0, 5.0, 4.0]


def test_the_cap_is_ten_thousand_rows_per_gpu(store: Store) -> None:
    assert store_health.KEEP_PER_GPU == 10_000
    store.record_health([throttle("a", 0, float(t)) for t in range(10_000)])
    store.record_health(
        [throttle("a", 0, 10_000.0 + t) for t in range(3)] + [throttle("a", 1, 1.0)]
    )
    kept = store.health_events(limit=20_000, gpu=("a", 0))
    assert len(kept) == 10_000
    assert (kept[0].time, kept[-1].time) == (10_002.0, 3.0)
    assert len(store.health_events(gpu=("a", 1))) == 1


# -- the states (a pure function) ----------------------------------------------------------
def _states(drains: list[DrainedGpu], events: list[HealthEvent]) -> dict[tuple[str, int], str]:
    found = health_states(POOL, {d.key: d for d in drains}, events, NOW)
    return {g.key: g.state for g in found}


def test_every_gpu_of_the_inventory_in_order_ok_without_events() -> None:
    found = health_states(POOL, {}, [], NOW)
    assert [g.key for g in found] == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0)]
    assert all(g == GpuHealth(g.node, g.gpu, HealthState.OK, None, ()) for g in found)


def test_a_health_drain_is_failed_an_admin_s_drained_whatever_the_events() -> None:
    drains = [
        DrainedGpu("a", 0, "XID 79: GPU has fallen off the bus", HEALTH_DRAINER, NOW - 10),
        DrainedGpu("a", 1, "fan", "root", NOW - 10),
    ]
    events = [xid_event("a", 0, NOW - 10, 79), xid_event("a", 1, NOW - 5, 48)]
    states = _states(drains, events)
    assert (states[("a", 0)], states[("a", 1)]) == ("failed", "drained")
    found = health_states(POOL, {d.key: d for d in drains}, events, NOW)
    assert found[0].drained == drains[0] and found[0].events == (events[0],)


def test_a_gpu_fault_or_a_throttle_in_the_last_hour_degrades_an_undrained_gpu() -> None:
    events = [
        xid_event("a", 0, NOW - RECENT_S, 79),  # a GPU fault, just an hour ago
        throttle("a", 1, NOW - 60),
        xid_event("a", 2, NOW - RECENT_S - 1, 48),  # more than an hour ago
        xid_event("a", 3, NOW - 1, 13),  # the job's fault: the GPU is fine
        xid_event("b", 0, NOW - 1, 999),  # no meaning known: nobody's
    ]
    assert _states([], events) == {
        ("a", 0): "degraded",
        ("a", 1): "degraded",
        ("a", 2): "ok",
        ("a", 3): "ok",
        ("b", 0): "ok",
    }


def test_a_gpu_shows_its_last_events_newest_first_and_unknown_gpus_are_left_out() -> None:
    events = [throttle("a", 0, NOW - t) for t in range(15)] + [throttle("zz", 0, NOW)]
    found = health_states(POOL, {}, list(reversed(events)), NOW)
    assert len(found) == 5
    assert [e.time for e in found[0].events] == [NOW - t for t in range(LAST_EVENTS)]


# -- the service ---------------------------------------------------------------------------
class StubEngine:
    def __init__(self) -> None:
        self.drains: list[list[DrainedGpu]] = []

    def drains_changed(self, drains: list[DrainedGpu]) -> None:
        self.drains.append(drains)


class Service(DrainMethods, HealthMethods):
    def __init__(self, store: Store, inventory: Inventory) -> None:
        self.store = store
        self.engine = StubEngine()  # type: ignore[assignment]
        self.inventory = inventory


def test_the_pool_service_has_the_health_methods() -> None:
    assert issubclass(PoolService, HealthMethods)


def test_the_service_records_logs_faults_and_answers_states(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    service = Service(store, POOL)
    lost = xid_event("a", 3, NOW - 30, 79)
    events = [lost, xid_event("a", 1, NOW - 20, 13), throttle("a", 2, NOW - 10)]
    with caplog.at_level(logging.WARNING, logger="gpupool.health"):
        service.record_health(events)
        service.record_health([])
    assert [r.getMessage() for r in caplog.records] == [
        "node a GPU 3: XID 79: GPU has fallen off the bus",
        "node a GPU 1: XID 13: graphics engine exception",
    ]
    assert fault_line(lost) == caplog.records[0].getMessage()
    service.drain(HEALTH_DRAINER, "a", 3, NOW - 29, lost.detail)
    service.drain("root", "b", 0, NOW - 5, "new PSU")
    found = service.health(NOW)
    assert [(g.key, str(g.state)) for g in found] == [
        (("a", 0), "ok"),
        (("a", 1), "ok"),
        (("a", 2), "degraded"),
        (("a", 3), "failed"),
        (("b", 0), "drained"),
    ]
    assert found[3].events == (lost,) and found[3].drained is not None
    assert found[3].drained.reason == "XID 79: GPU has fallen off the bus"
    # An hour later the throttle is old news.
    assert service.health(NOW + RECENT_S + 1)[2].state is HealthState.OK


def test_a_fault_behind_more_than_the_last_events_still_degrades(store: Store) -> None:
    """A GPU fault 50 minutes ago, then a job's XID every minute since: the last 10 events
    are the job's, but the GPU's fault is of the last hour."""
    service = Service(store, POOL)
    events = [xid_event("a", 0, NOW - 3000, 48)]
    events += [xid_event("a", 0, NOW - 60 * m, 13) for m in range(40, 0, -1)]
    service.record_health(events)
    (g,) = [g for g in service.health(NOW) if g.key == ("a", 0)]
    assert g.state is HealthState.DEGRADED
    assert len(g.events) == LAST_EVENTS and all(e.code == 13 for e in g.events)
    assert g.events[0].time == NOW - 60
