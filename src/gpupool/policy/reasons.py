"""Why a job waits, and why a job is preempted, as data: the dimension that binds and its
figures, the reservation, the jobs waited for. The pass builds no words; `policy/render.py`
renders these at the edges (`gpupool why`, `queue`, `show`, the API, the daemon's log), so
`--json` and a dashboard read the same structure (DESIGN.md: "A decision is data").

As Nomad's feasibility checkers each name the dimension they found exhausted, every check of
the pass (policy/filters/, the quota book, the reservation) reports an `Insufficient`:
what was requested, what is free, and what there is at most, on one node or across the pool.
Units follow the dimension: GPUs, bytes, CPUs, a fraction of one GPU, or nodes.

These are data only, at the bottom of the policy's imports: this module imports nothing of
gpupool, and the statuses (status.py), the decision (snapshot.py) and the words (words.py)
import it (tests/unit/test_policy_acyclic.py). So `Reservation`, which a decision hands back
and a status names, is defined here; snapshot.py exports it with the decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Dimension(StrEnum):
    GPU_TYPE = "gpu_type"  # GPUs of the requested model (none on the node: capacity 0)
    GPU_COUNT = "gpu_count"  # whole GPUs (of the requested model) free on one node
    GPU_MEMORY = "gpu_memory"  # bytes of room on one shared or free GPU (fractional jobs)
    GPU_FRACTION = "gpu_fraction"  # a part of one GPU: more than 0, at most 1
    CPUS = "cpus"
    MEMORY = "memory"  # host memory, bytes
    TOPOLOGY = "topology"  # nodes: a job spread over several (whole free nodes, per rule)
    QUOTA = "quota"  # the project's GPUs within its guaranteed quota
    LIMIT = "limit"  # the project's GPU limit


@dataclass(frozen=True, slots=True)
class Insufficient:
    """One check that failed: `requested` of `dimension`, `free` now, `capacity` at most
    (with everything else gone); on `node`, or across the pool (None)."""

    node: str | None
    dimension: Dimension
    requested: float
    free: float
    capacity: float


@dataclass(frozen=True)
class Reservation:
    """GPUs held back for a blocked job from `time` on (EASY backfill's one reservation)."""

    job_id: int
    node: str
    gpus: tuple[int, ...]
    time: float
    # A fractional job's reservation: the memory it is to get on its one GPU (None: the GPUs
    # are reserved whole). Jobs that outlast it may share that GPU within the rest.
    gpu_memory_bytes: int | None = None
    # A wide job's (policy/wide.py): its other nodes and the GPUs it holds on each, as
    # `Start.more`; (node, gpus) is the first of them. Jobs that outlast it keep off them all.
    more: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def parts(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """Every node it holds and the GPUs it holds there, the first node first."""
        return ((self.node, self.gpus), *self.more)


@dataclass(frozen=True, slots=True)
class Reserved:
    """The pass's one reservation as a status names it: the reserved job's own, or the one a
    job waits behind. `reservation` names every node and GPU it holds (a wide job's too)."""

    reservation: Reservation
    in_s: float  # from the pass to its start; <= 0: as soon as overdue jobs end; inf: never
    gpus: int  # every GPU it reserves (a wide job's over `nodes` nodes)
    nodes: int = 1
    wide: bool = False  # held by a job spread over nodes: `reservation.parts()` names them


@dataclass(frozen=True, slots=True)
class WideShortfall:
    """Why a job spread over nodes does not fit now, beyond the GPU count (policy/wide.py)."""

    fewest_nodes: int  # the fewest nodes it could run on, were all as large as the largest
    roomy_free: int  # free matching GPUs on nodes with the CPUs and memory it needs on each
    whole_free_nodes: int | None = None  # by the consolidate rule: whole free nodes it may use


@dataclass(frozen=True, slots=True)
class Standing:
    """What puts a job where it is in an order of `orders.py` (fifo, sjf, srtf, las)."""

    order: str
    klass: int  # the priority class, compared first
    # sjf: run time; srtf: time left; las: GPU-seconds attained; fifo: submit or start time.
    # None: the run time is unknown (sjf, srtf).
    figure: float | None
    level: int | None = None  # las: the level the attained service reached
    running: bool = False  # a running job (fifo: the figure is its start time)


@dataclass(frozen=True, slots=True)
class ReclaimCause:
    """A borrower preempted so that a job within its project's quota starts (figures before
    the reclaim)."""

    project: str  # the project within its quota
    quota: float
    in_use: float
    victim_project: str  # the borrowing project
    victim_quota: float
    victim_in_use: float  # once the victims chosen before it are gone


@dataclass(frozen=True, slots=True)
class OrderCause:
    """A running job preempted for a waiting one that ranks ahead of it (srtf, las)."""

    ahead: Standing  # the job it is preempted for
    victim: Standing


@dataclass(frozen=True, slots=True)
class DefragCause:
    """Running jobs preempted and requeued on one node so that a waiting job which fits in the
    pool's free GPUs, but on no one node, fits there; they fit at once on the other nodes'
    free GPUs (policy/defrag.py). The same figures for each victim and for the job's status."""

    node: str  # where the waiting job will run
    gpus: int  # the GPUs it asks for
    freed: int  # the GPUs its victims hold on `node`
    lost_gpu_s: float  # the work their restarts throw away, all of them (victim_cost.py)
    pool_free: int  # free GPUs (of its type) across the pool, before the preemption
    most_free: int  # the most free GPUs (of its type) on one node


@dataclass(frozen=True, slots=True)
class ClassCause:
    """A job of a higher priority class preempts one of a lower class: of its own project or
    a borrower (policy/class_preemption.py)."""

    klass: int  # the waiting job's class
    victim_klass: int
    victim_project: str
    lost_gpu_s: float  # the work the victim's restart throws away


@dataclass(frozen=True, slots=True)
class PaysCause:
    """A short job preempts one that checkpoints and would hold its GPUs far longer, at a small
    loss (policy/class_preemption.py: where it pays)."""

    need_s: float  # the waiting job's time limit
    victim_left_s: float  # until the victim's time limit ends
    lost_gpu_s: float  # the work the victim's restart throws away


PreemptionCause = ReclaimCause | OrderCause | DefragCause | ClassCause | PaysCause
