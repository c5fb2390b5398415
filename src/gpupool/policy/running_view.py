"""What the running jobs leave free, kept up to date between passes by a caller that runs
many of them (the trace replay), instead of counted from every running job in every pass.

A pass starts from what is free on each node, each project's GPUs in use, and when each
running job is expected to end (`free_view`, `NodeIndex.ends`). Counted afresh, that is one walk
over every running job per pass; on a 352-node simulated cluster with ~800 running jobs and
17,000 passes, it was a fifth of a replay. A `RunningView` is told each job piece that starts
(`add`) and stops (`remove`) and keeps those figures as they change, so a pass only copies
the containers it will write to (`node_index.KeptIndex`: nodes are copied when a start
writes to them, not before).

It is an optional input (`Snapshot.running_view`), not state the policy keeps: `decide` is
still a function of the snapshot, and it uses a view only when the view `serves` the snapshot
(same nodes, same running pieces in number, the same default time limit, no job that holds
part of a GPU and no memory held outside gpupool; those need the full count). The daemon reads
its snapshot from the store and passes none. `check` says where a view and a fresh count of
the snapshot disagree: the replay's tests run it on every pass.

This module reads snapshots (policy/snapshot.py), which name a view only by what it answers
(`snapshot.KeptView`) and never import it (tests/unit/test_policy_acyclic.py).
"""

from __future__ import annotations

from gpupool.core.hardware import Node
from gpupool.policy.free_view import free_view
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.node_free import NodeFree
from gpupool.policy.request import expected_end, holds_whole_gpus
from gpupool.policy.snapshot import RunningJob, Snapshot

Piece = tuple[int, str]  # (job id, node): a job spread over nodes runs as one piece per node


def _is_partial(r: RunningJob) -> bool:
    """Holds part of a GPU (fractional), or a GPU's memory: `free_view`'s `partial`."""
    return not holds_whole_gpus(r.resources, r.gpu_memory_bytes)


class RunningView:
    """The running pieces, what is free on each node, and each project's whole GPUs in use."""

    def __init__(self, nodes: tuple[Node, ...], default_time_limit_s: float) -> None:
        facts = NodeFacts.of(nodes)
        self.nodes = nodes
        self.default_limit = default_time_limit_s
        self._room = facts.declares_room  # else CPUs and memory are not counted (free_view)
        self.pieces: dict[Piece, RunningJob] = {}  # in the order they started
        self.on_node: dict[str, dict[Piece, RunningJob]] = {n.name: {} for n in nodes}
        # One NodeFree per node, in name order, as `free_view` builds them. A pass never
        # writes to these: FreeIndex copies a node before its first write.
        self.frees = [
            NodeFree(n, set(n.gpu_indices), n.cpus or None, n.memory_bytes or None)
            for n in facts.by_name_order
        ]
        self.by_name = {f.node.name: f for f in self.frees}
        self.position = {f.node.name: i for i, f in enumerate(self.frees)}
        # The nodes by free GPU count, as FreeIndex groups them.
        self.groups: list[dict[str, NodeFree]] = [{} for _ in range(facts.most_gpus + 1)]
        for f in self.frees:
            self.groups[len(f.gpus)][f.node.name] = f
        self.whole_in_use: dict[str, float] = {}  # project -> GPUs of its whole-GPU pieces
        self.ends: dict[Piece, tuple[float, str, int]] = {}  # (expected end, node, GPUs)
        self.partial = 0  # pieces holding part of a GPU: while any runs, the view stands aside

    def running(self) -> tuple[RunningJob, ...]:
        """`Snapshot.running` as this view describes it."""
        return tuple(self.pieces.values())

    def serves(self, snapshot: Snapshot) -> bool:
        """Whether a pass over `snapshot` may use this view (module docstring). The caller
        vouches that the pieces are the snapshot's running jobs; the count is a cheap guard."""
        return (
            snapshot.nodes is self.nodes
            and not self.partial
            and not snapshot.unmanaged_memory
            and len(snapshot.running) == len(self.pieces)
            and snapshot.config.default_time_limit_s == self.default_limit
        )

    def add(self, r: RunningJob) -> None:
        key = (r.id, r.node)
        self.pieces[key] = r
        self.on_node.setdefault(r.node, {})[key] = r
        end = expected_end(r.start_time, r.time_limit_s, self.default_limit)
        self.ends[key] = (end, r.node, len(r.gpus))
        if _is_partial(r):
            self.partial += 1
        else:
            self.whole_in_use[r.project] = self.whole_in_use.get(r.project, 0.0) + len(r.gpus)
        free = self.by_name.get(r.node)
        if free is not None:
            group = self.groups
            del group[len(free.gpus)][r.node]
            free.gpus.difference_update(r.gpus)
            group[len(free.gpus)][r.node] = free
            self._room_taken(free, r, -1)

    def remove(self, r: RunningJob) -> None:
        key = (r.id, r.node)
        del self.pieces[key]
        del self.on_node[r.node][key]
        del self.ends[key]
        if _is_partial(r):
            self.partial -= 1
        else:
            left = self.whole_in_use[r.project] - len(r.gpus)
            if left:
                self.whole_in_use[r.project] = left
            else:  # as a fresh count, which has no entry for a project with nothing running
                del self.whole_in_use[r.project]
        free = self.by_name.get(r.node)
        if free is not None:
            group = self.groups
            del group[len(free.gpus)][r.node]
            # From what is left on the node, not by adding `r`'s GPUs back: a GPU may be
            # held by more than one piece (fractional jobs sharing it).
            held = [p.gpus for p in self.on_node[r.node].values()]
            free.gpus = set(free.node.gpu_indices).difference(*held)
            group[len(free.gpus)][r.node] = free
            self._room_taken(free, r, +1)

    def _room_taken(self, free: NodeFree, r: RunningJob, sign: int) -> None:
        if not self._room:
            return
        res = r.resources
        if free.cpus is not None and res.cpus:
            free.cpus += sign * res.cpus
        if free.mem_bytes is not None and res.mem_bytes:
            free.mem_bytes += sign * res.mem_bytes

    def check(self, snapshot: Snapshot) -> list[str]:
        """Where this view and a fresh count of `snapshot` differ (empty: they agree)."""
        out = []
        if list(self.running()) != list(snapshot.running):
            out.append("running pieces differ from the snapshot's")
        fresh = free_view(snapshot)
        for mine, theirs in zip(self.frees, fresh.frees, strict=True):
            if (mine.gpus, mine.cpus, mine.mem_bytes) != (
                theirs.gpus,
                theirs.cpus,
                theirs.mem_bytes,
            ):
                out.append(f"node {mine.node.name}: {mine!r} != {theirs!r}")
        if self.whole_in_use != fresh.whole_in_use:
            out.append(f"whole GPUs in use {self.whole_in_use} != {fresh.whole_in_use}")
        for count, group in enumerate(self.groups):
            wrong = [name for name, f in group.items() if len(f.gpus) != count]
            if wrong:
                out.append(f"nodes {wrong} grouped under {count} free GPUs")
        return out
