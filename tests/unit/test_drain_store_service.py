"""Drains kept in the store (store/drains.py, on SQLite and PostgreSQL), the GPUs a request
names and the reasons kept (service/drains.py), and the engine's state: a drain reaches its
snapshot, and a pass keeps the GPU out (engine/state.py, policy/drains.py)."""

from __future__ import annotations

import pytest
from test_store import store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.drain import REASON_MAX, DrainedGpu
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.engine.events import DrainsRead
from gpupool.engine.react import react
from gpupool.engine.state import EngineState
from gpupool.policy.snapshot import PolicyConfig, Usage
from gpupool.service.drains import InvalidDrain, checked_reason, gpus_named, where
from gpupool.store import Store

GIB = 1 << 30


def _node(name: str, count: int) -> Node:
    return Node(name, tuple(Gpu(i, "A100-80GB", 80 * GIB) for i in range(count)))


ONE = Inventory((_node("box", 4),), "declared")
TWO = Inventory((_node("a", 2), _node("b", 0)), "declared")


def test_drains_are_kept_renewed_with_their_first_time_and_resumed(store: Store) -> None:
    assert store.drained_gpus() == []
    kept = store.drain_gpus([("box", 2), ("box", 0)], "ecc", "root", 100.0)
    assert [d.key for d in kept] == [("box", 0), ("box", 2)]
    again = store.drain_gpus([("box", 2)], "xid 79", "ops", 200.0)
    assert again == [DrainedGpu("box", 2, "xid 79", "ops", 100.0)]  # the first time stays
    assert store.drained_gpus() == [
        DrainedGpu("box", 0, "ecc", "root", 100.0),
        DrainedGpu("box", 2, "xid 79", "ops", 100.0),
    ]
    gone = store.resume_gpus([("box", 2), ("box", 3)])  # 3 was never drained
    assert [d.key for d in gone] == [("box", 2)]
    assert [d.key for d in store.drained_gpus()] == [("box", 0)]
    assert store.resume_gpus([("box", 2)]) == []


def test_a_request_names_a_node_s_gpus_or_one_gpu_or_the_only_node() -> None:
    assert gpus_named(ONE, "box", None) == [("box", g) for g in range(4)]
    assert gpus_named(ONE, "box", 3) == [("box", 3)]
    assert gpus_named(ONE, None, 1) == [("box", 1)]
    with pytest.raises(InvalidDrain, match=r"node box has no GPU 4 \(its GPUs: 0, 1, 2, 3\)"):
        gpus_named(ONE, "box", 4)
    with pytest.raises(InvalidDrain, match=r"no node 'x' in this pool \(its nodes: box\)"):
        gpus_named(ONE, "x", None)
    with pytest.raises(InvalidDrain, match=r"name the node: this pool has 2 \(a, b\)"):
        gpus_named(TWO, None, 0)
    with pytest.raises(InvalidDrain, match="node b has no GPUs to drain"):
        gpus_named(TWO, "b", None)


def test_a_reason_is_one_printable_line_of_at_most_its_limit() -> None:
    assert checked_reason("  XID 79  ") == "XID 79"
    assert checked_reason("") == ""
    with pytest.raises(InvalidDrain, match="one line of printable text"):
        checked_reason("a\nb")
    with pytest.raises(InvalidDrain, match=f"at most {REASON_MAX}"):
        checked_reason("x" * (REASON_MAX + 1))


def test_where_names_each_node_s_gpus() -> None:
    assert where([("a", 1)]) == "node a GPU 1"
    assert where([("a", 0), ("a", 1), ("b", 3)]) == "node a GPUs 0, 1; node b GPU 3"


def test_the_engine_s_state_gives_its_drains_to_the_pass_and_a_change_is_news() -> None:
    state = EngineState(ONE, PolicyConfig())
    react(state, DrainsRead((DrainedGpu("box", 1, "ecc", "root", 1.0),)))
    assert state.dirty
    assert state.snapshot(0, Usage()).drained == frozenset({("box", 1)})
    state.dirty = False
    react(state, DrainsRead((DrainedGpu("box", 1, "ecc", "root", 1.0),)))
    assert not state.dirty  # the same drains: no pass for it
    react(state, DrainsRead(()))
    assert state.dirty and state.snapshot(0, Usage()).drained == frozenset()
