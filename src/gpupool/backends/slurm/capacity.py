"""A Slurm cluster's GPU nodes as `Capacity` (core/backends.py), from one `sinfo` (NODE_ARGV).
Pure: text in, data out.

Why sinfo's GresUsed and not `scontrol show node`'s AllocTRES: AllocTRES counts GPUs only on
a cluster that tracks them as a TRES (`AccountingStorageTRES=gres/gpu`), and many do not
(the tests' cluster does not: its AllocTRES is `cpu=1` while a job holds a GPU); GresUsed is
slurmctld's own count of allocated GRES, always there. Slurm 22.05 to 23.11 print the same.

One line per node and partition (`-N`), fields ended by `|` (Reason last: its text may hold
anything but a newline, so it is the rest of the line):

- NodeList: the node's name, also its `pin` (`--nodelist`).
- Partition: `main*` (`*` marks the default partition). A backend with partitions configured
  (`partition`, `partitions`) sees only the nodes of those; one without sees every node.
- StateComplete: `idle`, `mixed+drain`, `down+not_responding`: a base state plus flags.
  DOWN, FAIL, NOT_RESPONDING (and FUTURE, a node not yet in service) -> DOWN; DRAIN,
  DRAINED, DRAINING -> DRAINED, with the state and Reason as the detail; anything else
  (IDLE, MIXED, ALLOCATED, COMPLETING, a cloud node POWERED_DOWN that Slurm resumes on
  demand) -> UP.
- Gres `gpu:2` or `gpu:a100:4(S:0-1)` (several, comma-separated; other GRES left out): the
  GPUs, and the type when one type is named for all of them (`gpu_model`).
- GresUsed `gpu:1(IDX:0)`, `gpu:a100:2(IDX:0-1)`: `gpus_used` (every job's, any owner).
- CPUs, Memory (MiB: Slurm's "MB" are 2**20 bytes).

Nodes without GPUs are left out: the pool admits GPU jobs against GPU nodes
(`Backend.capacity` says "the engine's nodes with GPUs"), and a CPU-only node listed with 0
GPUs would only be one more row for the policy to skip.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from gpupool.core.backends import EngineNode, EngineNodeState

FIELDS = "NodeList:|,Partition:|,StateComplete:|,Gres:|,GresUsed:|,CPUs:|,Memory:|,Reason:|"
NODE_ARGV = ("sinfo", "-N", "-h", "-O", FIELDS)
MIB = 1 << 20
_DOWN_FLAGS = {"DOWN", "FAIL", "FAILING", "NOT_RESPONDING", "FUTURE"}
_DRAIN_FLAGS = {"DRAIN", "DRAINED", "DRAINING"}


def gres_gpus(gres: str) -> tuple[int, str]:
    """`gpu:a100:4(S:0-1),shard:8` -> (4, "a100"); the model is "" when untyped or mixed."""
    count, models = 0, set()
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] != "gpu" or len(parts) < 2 or not parts[-1].isdigit():
            continue
        count += int(parts[-1])
        models.add(parts[1] if len(parts) == 3 else "")
    return count, (models.pop() if len(models) == 1 else "")


def node_state(state: str) -> EngineNodeState:
    """Slurm's `base+flag+...` state as one of three (module docstring)."""
    words = {w.strip().rstrip("*~#!%$@^-").upper() for w in state.split("+")}
    if words & _DOWN_FLAGS:
        return EngineNodeState.DOWN
    if words & _DRAIN_FLAGS:
        return EngineNodeState.DRAINED
    return EngineNodeState.UP


def _number(text: str) -> int:
    return int(text) if text.strip().isdigit() else 0


@dataclass
class _Row:
    fields: list[str]
    partitions: set[str] = field(default_factory=set)


def parse_nodes(text: str, partitions: Collection[str] = ()) -> tuple[EngineNode, ...]:
    """The GPU nodes of NODE_ARGV's output, each once, only those in one of `partitions`
    when any are given (module docstring)."""
    rows: dict[str, _Row] = {}
    for line in text.splitlines():
        parts = line.split("|", 7)
        if len(parts) < 8 or not parts[0].strip():
            continue
        row = rows.setdefault(parts[0].strip(), _Row(parts))
        row.partitions.add(parts[1].strip().rstrip("*"))
    nodes: list[EngineNode] = []
    for name, row in rows.items():
        if partitions and not row.partitions & set(partitions):
            continue
        _, _, state_text, gres, used, cpus, memory, reason = (p.strip() for p in row.fields)
        gpus, model = gres_gpus(gres)
        if gpus == 0:
            continue
        state = node_state(state_text)
        reason = reason.removesuffix("|").strip()
        said = f"{state_text}: {reason}" if reason and reason != "none" else state_text
        nodes.append(
            EngineNode(
                name=name,
                gpus=gpus,
                gpus_used=min(gres_gpus(used)[0], gpus),
                gpu_model=model,
                cpus=_number(cpus),
                memory_bytes=_number(memory) * MIB,
                state=state,
                detail="" if state is EngineNodeState.UP else said,
                pin=name,
            )
        )
    return tuple(nodes)
