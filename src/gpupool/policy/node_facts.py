"""Facts about the nodes that every pass needs and that change only with the inventory: the
nodes in name order, each GPU's memory, the widest node per GPU type.

A pass used to recompute them from `Snapshot.nodes` every time: O(nodes) work that, on a
352-node simulated cluster replayed 20,000 times, cost more than the decisions themselves.
`NodeFacts.of(nodes)` keeps the facts of the last nodes tuple it saw, recognised by identity
(`is`, and the tuple is held, so its id cannot be reused): the daemon and the simulator pass
the same tuple every pass, and anything else just computes them afresh. Same answers either
way; this is a cache, not state.
"""

from __future__ import annotations

from gpupool.core.gpu_catalog import model_matches
from gpupool.core.hardware import Node


class NodeFacts:
    __slots__ = ("nodes", "by_name_order", "gpu_memory", "largest_gpu_memory", "most_gpus",
                 "total_gpus", "declares_room", "_widest")  # fmt: skip

    _last: NodeFacts | None = None

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
        last = cls._last
        if last is not None and last.nodes is nodes:
            return last
        facts = cls._last = NodeFacts(nodes)
        return facts

    def widest(self, gpu_type: str | None) -> int:
        """The most GPUs of `gpu_type` (None: any) on one node."""
        most = self._widest.get(gpu_type)
        if most is None:
            assert gpu_type is not None
            most = self._widest[gpu_type] = max(
                (sum(model_matches(gpu_type, g.model) for g in n.gpus) for n in self.nodes),
                default=0,
            )
        return most
