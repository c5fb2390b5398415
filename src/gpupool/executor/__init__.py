"""Starting jobs as processes on this machine, each under a supervisor that outlives the daemon:
the first implementation of the executor contract (core/execution.py)."""

from gpupool.executor.local import LocalExecutor
from gpupool.executor.records import JobBusyError

__all__ = ["JobBusyError", "LocalExecutor"]
