"""Starting jobs as processes on this machine, each under a supervisor that outlives the daemon."""

from gpupool.executor.leftovers import Leftovers
from gpupool.executor.local import LocalExecutor
from gpupool.executor.records import ExitRecord, JobBusyError, JobStatus

__all__ = ["ExitRecord", "JobBusyError", "JobStatus", "Leftovers", "LocalExecutor"]
