"""Why a job is (not) placed: a named code, the rule that said it, and its figures as data.

As in Kubernetes' scheduler framework, a status is not a bool: `Resources` (waiting may help)
differs from `Unsatisfiable` (it never will: refuse at submit). The code is the short,
Slurm-like word of the REASON column; the rule says which check of the pass gave it, and the
fields carry its figures (policy/reasons.py). Words are rendered from them on demand, at the
edges, by `policy.render.status_text(status)`, never by the pass: this module imports the
data it holds (reasons.py), never the words, which import it (tests/unit/test_policy_acyclic.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum

from gpupool.core.job import Resources
from gpupool.policy.reasons import DefragCause, Insufficient, Reserved, Standing, WideShortfall


class Code(str, Enum):
    # Short codes shown in the REASON column, Slurm-like.
    RESOURCES = "Resources"  # not enough free resources now; they exist in the pool
    PRIORITY = "Priority"  # a job ahead in the queue waits for resources first
    BEGIN_TIME = "BeginTime"  # held until its --begin time
    QUOTA = "Quota"  # its project's quota (borrowing needs --preemptible) or limit holds it
    RECLAIM = "Reclaim"  # within its quota: borrowed GPUs are being reclaimed for it
    UNSATISFIABLE = "Unsatisfiable"  # no node could ever run it
    DRAINED = "Drained"  # only drained GPUs could run it: it waits for a resume (drains.py)
    # its project's quota or limit can never let it start (as they are now): quota_feasibility
    QUOTA_NEVER_FITS = "QuotaNeverFits"
    # Given by the engine, not the pass: left out of it (engine/gating.py).
    DEPENDENCY = "Dependency"  # an --after job has not ended yet (`jobs`)
    ARRAY_LIMIT = "ArrayLimit"  # its array runs its %K tasks already (`jobs`: those running)
    HELD_USER = "JobHeldUser"  # held by its owner (gpupool hold, submit --hold)
    HELD_ADMIN = "JobHeldAdmin"  # held by an admin: only an admin releases it
    # A backend's job (docs/backends.md), never given to a pass: handed over to `backend`,
    # waiting in its queue (`detail`: why, in the backend's words).
    QUEUED_IN_BACKEND = "QueuedInBackend"
    NO_BACKEND = "NoBackend"  # its `backend` is not configured in this daemon's gpupool.toml
    # Admitted by the pool's policy, but its backend's nodes could not be read (`detail`)
    CAPACITY_UNKNOWN = "CapacityUnknown"


class Rule(StrEnum):
    """Which rule of the policy said it: finer than the code, one sentence of words each."""

    NO_NODES = "no_nodes"  # Unsatisfiable: the pool has no nodes
    NEVER_FITS = "never_fits"  # Unsatisfiable: `short` names what no node ever has enough of
    NEVER_FITS_POOL = "never_fits_pool"  # Unsatisfiable, spread over nodes: the pool's GPUs
    # Unsatisfiable, spread over nodes: the GPUs of the nodes with its CPUs and memory each
    NEVER_FITS_ROOMY = "never_fits_roomy"
    BAD_FRACTION = "bad_fraction"  # Unsatisfiable: a fraction outside (0, 1]
    BEGIN_TIME = "begin_time"  # BeginTime
    NO_FIT = "no_fit"  # Resources: fits on no node now (`short`, `nodes`; `reserved`: its own)
    WIDE_NO_FIT = "wide_no_fit"  # Resources: a job spread over nodes (`wide`)
    BEHIND_RESERVATION = "behind_reservation"  # Priority: it would delay `reserved`
    BEHIND_HEAD = "behind_head"  # Priority: no backfill; `jobs`: the first in line
    ORDER_PREEMPTION = "order_preemption"  # Priority: `jobs` are preempted for it (srtf, las)
    RECLAIM = "reclaim"  # Reclaim: `jobs` are preempted to give its project its quota
    CLASS_PREEMPTION = "class_preemption"  # Priority: `jobs` of lower classes are preempted
    PAYS_PREEMPTION = "pays_preemption"  # Priority: `jobs` that checkpoint, for a short job
    # Resources: `jobs` on one node are preempted and requeued elsewhere so that it fits
    # there (`defrag`: the figures; policy/defrag.py)
    DEFRAGMENT = "defragment"
    OVER_LIMIT = "over_limit"  # Quota: its project's limit (`short`)
    # Quota: `user`'s running jobs of `project` would hold more than its per-user GPU cap
    # (`short`: the job's GPUs, what is left of the cap, the cap; policy/user_caps.py)
    USER_GPUS = "user_gpus"
    USER_JOBS = "user_jobs"  # Quota: `user` runs `limit` jobs of `project`, its per-user cap
    NEVER_USER_GPUS = "never_user_gpus"  # QuotaNeverFits: asks more than the per-user cap
    # Quota: its project's CPU or memory limit (`short`: the dimension, the job's ask, what
    # is left, the limit; policy/room_limits.py); QuotaNeverFits: its ask alone is over it
    ROOM_LIMIT = "room_limit"
    NEVER_ROOM_LIMIT = "never_room_limit"
    NOT_PREEMPTIBLE = "not_preemptible"  # Quota: above quota, and borrowing needs it
    RECLAIMING = "reclaiming"  # Quota: GPUs are reclaimed for `jobs[0]` of its project
    NEVER_LIMIT = "never_limit"  # QuotaNeverFits: asks for more than its project's limit
    NEVER_QUOTA = "never_quota"  # QuotaNeverFits: not preemptible, more than its quota
    NEVER_QUOTA_INTERACTIVE = "never_quota_interactive"  # the same, for an interactive job
    DEPENDENCY = "dependency"  # Dependency: `jobs` have not ended
    ARRAY_LIMIT = "array_limit"  # ArrayLimit: `jobs` of its array run; `limit` at most
    HELD_USER = "held_user"  # JobHeldUser
    HELD_ADMIN = "held_admin"  # JobHeldAdmin
    QUEUED_IN_BACKEND = "queued_in_backend"  # QueuedInBackend: `backend`, `detail`
    NO_BACKEND = "no_backend"  # NoBackend: `backend`
    CAPACITY_UNKNOWN = "capacity_unknown"  # CapacityUnknown: `backend`, `detail`
    # Resources: a gang over `limit` nodes of `backend`: `short.requested` GPUs free on each
    # of them, `short.free` nodes have that now (engine/admission.py)
    GANG_NO_FIT = "gang_no_fit"
    BEHIND_GANG = "behind_gang"  # Priority: a gang ahead in line (`jobs`) took its GPUs
    # Drained: the pool less its drained GPUs could never run it (`short`: the figures
    # without them, as Unsatisfiable's; policy/drains.py)
    DRAINED = "drained"


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    rule: Rule
    short: Insufficient | None = None  # the binding dimension and its figures
    nodes: tuple[Insufficient, ...] = ()  # every node's, where the pass looked at each
    reserved: Reserved | None = None  # its own reservation, or the one it would delay
    jobs: tuple[int, ...] = ()  # the jobs it waits for (see Rule)
    project: str | None = None  # the project whose quota or limit says it
    user: str | None = None  # USER_GPUS, USER_JOBS, NEVER_USER_GPUS: whose cap
    standing: Standing | None = None  # ORDER_PREEMPTION: where the order puts it
    defrag: DefragCause | None = None  # DEFRAGMENT: the node, the GPUs freed, the pool's free
    wide: WideShortfall | None = None  # WIDE_NO_FIT
    # What the pool has where no figure says it: its GPU models (an unknown type), the
    # model of the largest GPU (a fractional job that fits on none).
    have: tuple[str, ...] = ()
    request: Resources | None = None  # what the job asks for, where the words name it
    limit: int | None = None  # ARRAY_LIMIT: the array's %K
    backend: str | None = None  # QUEUED_IN_BACKEND, NO_BACKEND, CAPACITY_UNKNOWN: its name
    # QUEUED_IN_BACKEND: why it waits there, as the backend says it; CAPACITY_UNKNOWN: why
    # the backend's nodes could not be read
    detail: str = ""

    @property
    def source(self) -> str:
        """The check that said it: the binding dimension, else the rule."""
        return self.short.dimension.value if self.short is not None else self.rule.value

    @property
    def unresolvable(self) -> bool:
        """It never will start as things are: refused at submit (a quota change may still
        let a `QuotaNeverFits` job already queued start; it waits for that)."""
        return self.code is Code.UNSATISFIABLE or self.code is Code.QUOTA_NEVER_FITS
