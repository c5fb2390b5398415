"""Pure scheduling: `decide(snapshot, now) -> Decision`.

No I/O, no wall clock, no randomness. The daemon's engine, the simulator and the tests all
drive this same function.
"""

from gpupool.policy.decide import decide
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.profiles import PROFILES, profile
from gpupool.policy.quota_feasibility import check_quota
from gpupool.policy.snapshot import Decision, PendingJob, RunningJob, Snapshot, Start
from gpupool.policy.status import Code, Status

__all__ = [
    "PROFILES",
    "Code",
    "Decision",
    "PendingJob",
    "RunningJob",
    "Snapshot",
    "Start",
    "Status",
    "check_quota",
    "check_satisfiable",
    "decide",
    "profile",
]
