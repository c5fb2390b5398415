"""`NodeFacts.of` is shared by the daemon's engine thread (every pass) and its API threads
(submit-time checks), which may ask about different inventories at once: each caller gets
the facts of its own nodes, and two inventories do not evict each other's facts on every
call (the cache kept one tuple: a thread asking about another inventory threw away the
engine's facts, which were then rebuilt on its next pass, O(nodes) each time)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
from policy_builders import node

from gpupool.core.hardware import Node
from gpupool.policy.node_facts import NodeFacts


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The ids of the node tuples NodeFacts was built for, in order."""
    built: list[int] = []
    real = NodeFacts.__init__

    def counting(self: NodeFacts, nodes: tuple[Node, ...]) -> None:
        built.append(id(nodes))
        real(self, nodes)

    monkeypatch.setattr(NodeFacts, "__init__", counting)
    yield built


def _inventory(prefix: str, count: int) -> tuple[Node, ...]:
    return tuple(node(f"{prefix}{i}", 2 + i % 7) for i in range(count))


def _expected(nodes: tuple[Node, ...]) -> tuple[int, int, int]:
    gpus = [len(n.gpus) for n in nodes]
    return max(gpus), sum(gpus), min(range(len(nodes)), key=lambda i: nodes[i].name)


def test_two_inventories_asked_in_turn_are_each_built_once(builds: list[int]) -> None:
    engine, api = _inventory("e", 40), _inventory("a", 3)
    for _ in range(50):  # a pass, then a submit-time check, then a pass...
        assert NodeFacts.of(engine).nodes is engine
        assert NodeFacts.of(api).nodes is api
    assert sorted(builds) == sorted([id(engine), id(api)])


def test_two_inventories_from_two_threads_are_each_built_once(builds: list[int]) -> None:
    engine, api = _inventory("e", 40), _inventory("a", 3)
    barrier = threading.Barrier(2)

    def ask(nodes: tuple[Node, ...]) -> None:
        barrier.wait()
        for _ in range(300):
            assert NodeFacts.of(nodes).nodes is nodes

    threads = [threading.Thread(target=ask, args=(n,)) for n in (engine, api)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Both may build the same tuple once at the same moment (built outside the lock); never
    # again after that.
    assert builds.count(id(engine)) <= 2 and builds.count(id(api)) <= 2


def test_threads_always_get_the_facts_of_their_own_nodes() -> None:
    """Many threads, more inventories than the cache keeps, switching threads as often as
    the interpreter allows: every answer is about the caller's nodes, widest per type
    included (filled lazily, under the lock)."""
    inventories = [_inventory(f"i{k}-", 3 + k) for k in range(NodeFacts.KEEP + 3)]
    errors: list[str] = []
    barrier = threading.Barrier(8)

    def ask(seed: int) -> None:
        barrier.wait()
        for step in range(400):
            nodes = inventories[(seed * 7 + step) % len(inventories)]
            facts = NodeFacts.of(nodes)
            most, total, _ = _expected(nodes)
            got = (facts.nodes is nodes, facts.most_gpus, facts.total_gpus, facts.widest("A100"))
            if got != (True, most, total, most):
                errors.append(f"thread {seed} step {step}: {got} for {most}, {total}")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=ask, args=(s,)) for s in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
