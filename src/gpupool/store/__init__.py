"""The durable state of the pool: jobs, their transitions and GPU allocations (SQLAlchemy);
projects, departments and who belongs where."""

from gpupool.store.projects import ProjectExists, ProjectInUse, UnknownProject
from gpupool.store.repository import StaleState, Store, UnknownJob

__all__ = ["ProjectExists", "ProjectInUse", "StaleState", "Store", "UnknownJob", "UnknownProject"]
