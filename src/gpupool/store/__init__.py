"""The durable state of the pool: jobs, their transitions and GPU allocations (SQLAlchemy);
projects, departments and who belongs where; the lease of the daemon that schedules; API
tokens (as salted hashes) and the audit log."""

from gpupool.core.store_errors import (
    ProjectExists,
    ProjectInUse,
    UnknownJob,
    UnknownProject,
    UnknownToken,
)
from gpupool.store.lease import Lease, LeaseHeld, LeaseHolder
from gpupool.store.repository import Store
from gpupool.store.stale import LeaseLost, StaleState

__all__ = [
    "Lease",
    "LeaseHeld",
    "LeaseLost",
    "LeaseHolder",
    "ProjectExists",
    "ProjectInUse",
    "StaleState",
    "Store",
    "UnknownJob",
    "UnknownProject",
    "UnknownToken",
]
