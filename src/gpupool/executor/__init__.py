"""Starting jobs as processes on this machine, each under a supervisor that outlives the daemon."""

from gpupool.executor.local import ExitRecord, JobStatus, LocalExecutor

__all__ = ["ExitRecord", "JobStatus", "LocalExecutor"]
