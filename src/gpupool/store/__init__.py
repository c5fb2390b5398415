"""The durable state of the pool: jobs, their transitions and GPU allocations (SQLAlchemy);
projects, departments and who belongs where; the lease of the daemon that schedules; API
tokens (as salted hashes) and the audit log."""

from gpupool.store.lease import Lease, LeaseHeld, LeaseHolder
from gpupool.store.projects import ProjectExists, ProjectInUse, UnknownProject
from gpupool.store.repository import Store, UnknownJob
from gpupool.store.stale import LeaseLost, StaleState
from gpupool.store.tokens import UnknownToken

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
