"""Named policy configurations: the daemon's own and the baselines a trace replay compares it
with, all run by the same `decide()`, so that a difference in the results is the policy's.

- **default**: the base config unchanged, what the daemon runs: multifactor priority order
  (fair share, expected service, age, size), EASY backfill, project quotas with borrowing
  and reclaim, priority classes that preempt, preemption where it pays, defragmentation.
- **fifo**: submit order, strict: the first job that cannot start blocks all later ones; no
  quotas. The plain batch queue every comparison starts from.
- **fifo-backfill**: submit order with EASY backfill (Lifka 1995, the Argonne scheduler;
  Maui and Slurm): later jobs start if they cannot delay the first blocked one.
- **sjf-oracle**: shortest job first on the true run time (an oracle), strict like the SJF
  baseline of the Helios artifact (Hu et al., SC'21), which stops at the first job that
  cannot start.
- **srtf-oracle**: shortest remaining time first on the true run time, preempting running
  jobs that rank behind a waiting one (Helios' SRTF baseline, placement-aware here), with
  backfill; no minimum run before preemption.
- **las**: Tiresias' discretized 2D-LAS (Gu et al., NSDI'19): least attained GPU-service
  first in levels (`las_thresholds_gpu_s`), FIFO inside a level, preemptive, with backfill;
  needs no run-time knowledge.
- **drf**: max-min fair shares of the GPUs across projects by progressive filling (Dominant
  Resource Fairness, Ghodsi et al., NSDI'11, with the GPU as the one resource), with backfill;
  fairness comes from the order, so quotas are off.
- **static**: the default with nothing lent: each project its quota as dedicated GPUs (its
  limit is its quota), the projects without a quota sharing the GPUs no quota names
  (policy/dedicated.py). What pooling is measured against (the Run:ai whitepaper's
  comparison); the trace replay runs it, the daemon never does.

Each profile is the base config with a few fields replaced, so what the base sets and a
profile does not name (`spread_wide_jobs`, `default_time_limit_s`, the priority weights)
carries over.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpupool.policy.snapshot import PolicyConfig

# The baselines are the published algorithms: none of the pool's own preemptions
# (defragmentation, priority classes, where it pays), so a comparison measures them as their
# authors ran them. `static` keeps them: it is the pool, with nothing lent.
_AS_PUBLISHED: dict[str, Any] = {
    "defragment": False,
    "preempt_lower_classes": False,
    "preempt_where_it_pays": False,
}

_CHANGES: dict[str, dict[str, Any]] = {
    "default": {},
    "fifo": {"order": "fifo", "backfill": False, "use_quotas": False, **_AS_PUBLISHED},
    "fifo-backfill": {"order": "fifo", "backfill": True, "use_quotas": False, **_AS_PUBLISHED},
    "sjf-oracle": {"order": "sjf", "backfill": False, "use_quotas": False, **_AS_PUBLISHED},
    "srtf-oracle": {
        **_AS_PUBLISHED,
        "order": "srtf",
        "preempt_for_order": True,
        "min_runtime_s": 0.0,
        "backfill": True,
        "use_quotas": False,
    },
    "las": {
        **_AS_PUBLISHED,
        "order": "las",
        "preempt_for_order": True,
        "min_runtime_s": 0.0,
        "backfill": True,
        "use_quotas": False,
    },
    "drf": {"order": "drf", "backfill": True, "use_quotas": False, **_AS_PUBLISHED},
    "static": {"lend_idle": False},
}


def profile(name: str, base: PolicyConfig = PolicyConfig()) -> PolicyConfig:
    """The config of profile `name` on top of `base` (module docstring)."""
    changes = _CHANGES.get(name)
    if changes is None:
        raise ValueError(
            f"unknown policy profile {name!r}: known profiles are {', '.join(_CHANGES)}"
        )
    return replace(base, **changes)


PROFILES: dict[str, PolicyConfig] = {name: profile(name) for name in _CHANGES}
