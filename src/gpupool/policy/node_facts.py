"""Facts about the nodes that every pass needs and that change only with the inventory: the
nodes in name order, each GPU's memory, the widest node per GPU type.

A pass used to recompute them from `Snapshot.nodes` every time: O(nodes) work that, on a
352-node simulated cluster replayed 20,000 times, cost more than the decisions themselves.
`NodeFacts.of(nodes)` keeps the facts of the last few nodes tuples it saw, recognised by
identity (`is`; an entry holds its tuple, so the id cannot be reused while it is kept): the
daemon and the simulator pass the same tuple every pass, and anything else just computes them
afresh. Same answers either way; this is a cache, not state.

Thread-safe: the daemon's engine thread and its API threads (submit-time checks) ask at the
same time, maybe for different tuples. The cache is read and written under one lock, and a
`NodeFacts` is complete before anyone sees it: everything is computed in `__init__` but the
widest node per GPU type, which is filled under the same lock. Several tuples are kept (the
least recently used goes first), so two callers with two inventories do not evict each
other's facts on every call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import ClassVar

from gpupool.core.gpu_catalog import model_matches
from gpupool.core.hardware import Node


class NodeFacts:
    __slots__ = ("nodes", "by_name_order", "gpu_memory", "largest_gpu_memory", "most_gpus",
                 "total_gpus", "declares_room", "_widest")  # fmt: skip

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _kept: ClassVar[OrderedDict[int, NodeFacts]] = OrderedDict()  # by id(nodes), oldest first
    KEEP: ClassVar[int] = 4

    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.nodes = nodes
        self.by_name_order = sorted(nodes, key=lambda n: n.name)
        self.gpu_memory = {(n.name, g.index): g.memory_bytes for n in nodes for g in n.gpus}
        self.largest_gpu_memory = max(self.gpu_memory.values(), default=0)
        self.most_gpus = max((len(n.gpus) for n in nodes), default=0)
        self.total_gpus = sum(len(n.gpus) for n in nodes)
        # Some node declares CPUs or memory: only then are jobs' CPUs and memory counted.
        self.declares_room = any(n.cpus or n.memory_bytes for n in nodes)
        self._widest: dict[str | None, int] = {None: self.most_gpus}

    @classmethod
    def of(cls, nodes: tuple[Node, ...]) -> NodeFacts:
        key = id(nodes)
        with cls._lock:
            facts = cls._kept.get(key)
            if facts is not None and facts.nodes is nodes:
                cls._kept.move_to_end(key)
                return facts
        built = NodeFacts(nodes)  # outside the lock: O(nodes), and it touches nothing shared
        with cls._lock:
            cls._kept[key] = built
            cls._kept.move_to_end(key)
            while len(cls._kept) > cls.KEEP:
                cls._kept.popitem(last=False)
        return built

    def widest(self, gpu_type: str | None) -> int:
        """The most GPUs of `gpu_type` (None: any) on one node."""
        most = self._widest.get(gpu_type)
        if most is None:
            assert gpu_type is not None
            most = max(
                (sum(model_matches(gpu_type, g.model) for g in n.gpus) for n in self.nodes),
                default=0,
            )
            with self._lock:
                self._widest[gpu_type] = most
        return most
