"""What every backend shares: the parts of the executor contract that mean little for a run
in another engine, answered once here (core/backends.py says what a backend is).

A backend subclasses `RemoteExecutor` and writes `capabilities`, `launch`, `poll`, `signal`,
`logs`, `log_location`, `health`, `name` and `kind`; it overrides the rest where its engine
can do more (Slurm changes a running job's time limit and sends it signals).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from gpupool.core.containers import ContainerEngine
from gpupool.core.execution import Handle, Leftovers, Observation


class RemoteExecutor:
    """Defaults for a backend (module docstring). Not a Protocol: a base class of code."""

    def container_engines(self) -> Sequence[ContainerEngine]:
        """A backend runs images with its own engine (Kubernetes, Pyxis, Ray's image_uri):
        the pool chooses none for it."""
        return ()

    def poll(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        raise NotImplementedError

    def adopt(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        """The runs live in the engine, not in the daemon: after a restart polling them is
        taking them back."""
        return self.poll(handles)

    def set_time_limit(self, handle: Handle, seconds: float) -> bool:
        return False

    def send_signal(self, handle: Handle, signum: int) -> bool:
        return False

    def release(self, handle: Handle) -> bool:
        """Nothing of an ended run is kept here for the next attempt."""
        return True

    def settle_lost(self, handle: Handle, wait_s: float) -> Leftovers:
        """A backend's runs are never LOST (its engine knows their end, or it is UNKNOWN)."""
        return Leftovers(main_pid=None)

    @property
    def data_dir(self) -> Path | None:
        return None

    def close(self) -> None:
        return None
