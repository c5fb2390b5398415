"""The durable state of the pool: jobs, their transitions and GPU allocations (SQLAlchemy)."""

from gpupool.store.repository import StaleState, Store, UnknownJob

__all__ = ["StaleState", "Store", "UnknownJob"]
