"""The read-only world the policy decides on, and the decision it hands back.

Data only: this module imports the data types it holds (reasons.py, status.py) and nothing
that reads a snapshot or renders a decision in words (words.py: `preemption_text`), which
import it (tests/unit/test_policy_acyclic.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.core.project import Project
from gpupool.policy.reasons import PreemptionCause
from gpupool.policy.reasons import Reservation as Reservation  # part of the decision
from gpupool.policy.status import Status


@dataclass(frozen=True)
class PendingJob:
    id: int
    resources: Resources
    priority: int  # 0..1000; the class names map to 100/200/300/400 (core.job)
    submit_time: float
    user: str = ""
    project: str = "default"
    time_limit_s: float | None = None
    begin_time: float | None = None  # not startable before this (sbatch --begin)
    preemptible: bool = True  # may borrow above its project's quota, and be reclaimed
    # What an oracle knows (the simulator's sjf/srtf baselines): the job's whole run time.
    # The daemon never sets it; no default-profile decision reads it.
    runtime_hint_s: float | None = None
    attained_s: float = 0.0  # seconds run in earlier attempts (preempted and requeued)
    restarts: int = 0  # its requeues so far: preemptions and retries (a thrashing bound)
    # It keeps its work across a restart (it writes GPUPOOL_CHECKPOINT_DIR, or the replay
    # models checkpointing): stopping it loses little (policy/victim_cost.py).
    checkpointing: bool = False


@dataclass(frozen=True)
class RunningJob:
    id: int
    node: str
    gpus: tuple[int, ...]
    resources: Resources
    start_time: float
    priority: int = 0
    user: str = ""
    project: str = "default"
    time_limit_s: float | None = None
    preemptible: bool = True
    gpu_memory_bytes: int | None = None  # on its one GPU, for fractional jobs
    runtime_hint_s: float | None = None  # as PendingJob.runtime_hint_s
    attained_s: float = 0.0  # seconds run in earlier attempts, before start_time
    restarts: int = 0  # as PendingJob.restarts
    checkpointing: bool = False  # as PendingJob.checkpointing
    # A job spread over several nodes (PolicyConfig.spread_wide_jobs) appears once per node,
    # with the same id, the GPUs it holds there, and resources.gpus = len(gpus).


@dataclass(frozen=True)
class PriorityWeights:
    """Weights of the factors that order jobs inside one priority class (each factor is in
    [0, 1]); the class itself always comes first."""

    fairshare: float = 10_000.0
    age: float = 1_000.0
    size: float = 100.0
    age_max_s: float = 7 * 86400.0  # the age factor reaches 1 after this long in the queue
    # The service factor (ordering.py): less expected GPU-service first (GPUs x the time
    # limit), on a log scale that reaches 0 at this much.
    service: float = 10_000.0
    service_max_gpu_s: float = 8 * 7 * 86400.0


class WidePlacement(StrEnum):
    """Which nodes a job wider than any node takes (`PolicyConfig.spread_wide_jobs` on;
    policy/wide.py says each rule in full)."""

    # The nodes with the most free GPUs first, partly used or not, the last one best fit:
    # the fewest nodes, starting as soon as enough GPUs are free anywhere.
    SPREAD = "spread"
    # Whole free nodes only (all their GPUs free), and for a size that is not a multiple of
    # the node size the remainder on the one other node with the most free GPUs: as the
    # consolidate placer of the Helios artifact and Slurm's --exclusive, so published
    # replays can be reproduced.
    CONSOLIDATE = "consolidate"


@dataclass(frozen=True)
class PolicyConfig:
    # Backfill needs an end time for every running job; jobs without --time get this one.
    default_time_limit_s: float = 24 * 3600.0
    weights: PriorityWeights = PriorityWeights()
    fairshare_half_life_s: float = 7 * 86400.0
    # No job is preempted before it ran this long, except to honour a project's quota.
    min_runtime_s: float = 300.0
    # Reclaim spares a borrower whose time limit ends within this long: it frees its GPUs by
    # then anyway, and preempting it would throw away the most work.
    reclaim_patience_s: float = 3600.0
    # A claim reclaims only once it has waited this long since submit: GPUs free up all the
    # time on a busy pool, and a claim that would start soon anyway need not throw away a
    # borrower's work (docs/scheduling-quality.md measures it).
    reclaim_after_s: float = 0.0
    # A preemption the quotas do not require never stops a job requeued this often already
    # (policy/victim_cost.py): it is left to finish.
    preempt_max_restarts: int = 3
    # What a job that checkpoints is taken to lose when stopped: the work since its last
    # checkpoint, which the pool does not see (policy/victim_cost.py).
    checkpoint_loss_s: float = 600.0
    # A higher priority class preempts preemptible jobs of lower classes: of its own project,
    # and borrowers of others (policy/class_preemption.py).
    preempt_lower_classes: bool = True
    # A short waiting job may stop a job that checkpoints and would hold its GPUs at least
    # `preempt_gain_ratio` times longer than the waiting job needs them, if the stop loses at
    # most `preempt_max_loss_gpu_s` (policy/class_preemption.py: where it pays).
    preempt_where_it_pays: bool = True
    preempt_gain_ratio: float = 10.0
    preempt_max_loss_gpu_s: float = 900.0
    # Both look at this many waiting jobs, in queue order: the head of the line.
    preempt_look_ahead: int = 50
    # Per-user caps where a project sets none (policy/user_caps.py; `gpupool server
    # --max-gpus-per-user`, `--max-jobs-per-user`): None, no cap.
    max_gpus_per_user: float | None = None
    max_running_jobs_per_user: int | None = None
    # A waiting job that fits in the pool's free GPUs but on no one node has preemptible jobs
    # of one node requeued onto the others' free GPUs, so that it fits there (policy/defrag.py).
    defragment: bool = True
    # ... only where it pays: the victims lose at most this share of the GPU-time the job would
    # wait for its reservation (its GPUs x the time until it).
    defrag_loss_share: float = 0.25
    # --- Named profiles (policy/profiles.py) change these; the daemon runs the defaults. ---
    # Queue order: "priority" (class, fair share, service, age, size: ordering.py), "fifo" (submit
    # time), "sjf" (runtime_hint_s), "srtf" (runtime_hint_s - attained_s), "las" (attained
    # GPU-seconds in discrete levels, then submit time), "drf" (the project with the smallest
    # share of the GPUs in use first). All but "priority" still put the class first.
    order: str = "priority"
    backfill: bool = True  # False: the first job that cannot start blocks all later ones
    use_quotas: bool = True  # False: Snapshot.projects is ignored (single-queue baselines)
    # False: the `static` profile: each project its quota as dedicated GPUs, nothing lent
    # (policy/dedicated.py). Read where jobs are booked to projects: the trace replay only.
    lend_idle: bool = True
    # Preempt running jobs that rank below a waiting job which would fit without them
    # (srtf, las): the preemptive baselines; runs longer than min_runtime_s only.
    preempt_for_order: bool = False
    # "las": the attained-service (GPU-seconds) thresholds between its priority levels.
    las_thresholds_gpu_s: tuple[float, ...] = (3600.0, 36000.0)
    # A whole-GPU job asking for more GPUs than any node has is spread over several nodes
    # (fewest nodes first), as a cluster backend would run it. The daemon on one box keeps
    # this off: such a job is refused at submit.
    spread_wide_jobs: bool = False
    # How such a job is laid over the nodes (WidePlacement).
    wide_placement: WidePlacement = WidePlacement.SPREAD


@dataclass(frozen=True)
class Usage:
    """Decayed GPU-seconds (half-life PolicyConfig.fairshare_half_life_s) up to the snapshot."""

    by_project: Mapping[str, float] = field(default_factory=dict)
    by_user: Mapping[tuple[str, str], float] = field(default_factory=dict)  # (project, user)


class KeptView(Protocol):
    """What `Snapshot.running_view` holds: a `RunningView` (policy/running_view.py), which
    reads snapshots and so is named here by what it answers, not imported. A pass uses it
    only as a RunningView that `serves` the snapshot (policy/node_index.py), else counts."""

    def serves(self, snapshot: Snapshot) -> bool: ...


@dataclass(frozen=True)
class Snapshot:
    """Nodes, what runs where, and what waits. `version` is the store's allocation version
    the snapshot was read at: a decision is committed only if it is still current."""

    nodes: tuple[Node, ...]
    pending: tuple[PendingJob, ...] = ()
    running: tuple[RunningJob, ...] = ()
    version: int = 0
    config: PolicyConfig = PolicyConfig()
    usage: Usage = Usage()
    # Projects by name (quota, limit, weight); a job's project missing here has quota 0.
    projects: Mapping[str, Project] = field(default_factory=dict)
    # GPU memory held by processes gpupool does not manage, by (node, GPU index).
    unmanaged_memory: Mapping[tuple[str, int], int] = field(default_factory=dict)
    # GPUs an admin drained, by (node, GPU index): no job starts on them (policy/drains.py).
    drained: frozenset[tuple[str, int]] = frozenset()
    # What `running` leaves free, kept up to date by a caller that runs many passes (the
    # trace replay), so a pass need not count it from every running job: it must describe
    # exactly `running` (policy/running_view.py). None: counted in the pass.
    running_view: KeptView | None = field(default=None, compare=False, repr=False)

    def used_gpus(self) -> dict[str, set[int]]:
        used: dict[str, set[int]] = {n.name: set() for n in self.nodes}
        for r in self.running:
            used.setdefault(r.node, set()).update(r.gpus)
        return used


@dataclass(frozen=True)
class Start:
    job_id: int
    node: str
    gpus: tuple[int, ...]
    gpu_memory_bytes: int | None = None  # fractional jobs: the memory granted on its GPU
    # A job spread over several nodes (PolicyConfig.spread_wide_jobs): its other nodes and
    # the GPUs it gets on each; (node, gpus) is the first of them.
    more: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class Preemption:
    """Stop `job_id` gracefully and requeue it, so that `for_job_id` can start (the engine
    signals; the policy only chooses). `cause`: why, as data (policy/reasons.py); in words,
    for the daemon's log and the job's history: `policy.render.preemption_text(preemption)`."""

    job_id: int
    for_job_id: int
    cause: PreemptionCause


@dataclass(frozen=True)
class PriorityFactors:
    """How a pending job's place in the queue was computed (`gpupool queue --priority`)."""

    job_id: int
    klass: int  # the priority class value, compared first
    fairshare: float
    age: float
    size: float
    score: float  # the weighted sum of the factors, compared inside a class
    service: float = 0.0  # 1 for the least expected GPU-service, 0 from service_max_gpu_s


@dataclass(frozen=True)
class Decision:
    starts: tuple[Start, ...] = ()
    pending: Mapping[int, Status] = field(default_factory=dict)  # why each non-started job waits
    reservations: tuple[Reservation, ...] = ()
    # Expected start per pending job (epoch seconds) where the model can tell; absent: unknown.
    estimated_start: Mapping[int, float] = field(default_factory=dict)
    priorities: Mapping[int, PriorityFactors] = field(default_factory=dict)
    preemptions: tuple[Preemption, ...] = ()
    # The pending jobs' ids in the order the pass took them (policy.ordering.rank): the
    # queue's order, which `gpupool queue` shows without ranking the queue again.
    order: tuple[int, ...] = ()
