"""Each admitting backend's capacity, read in a thread of its own (engine/admission.py).

`Backend.capacity` is one or two calls to the engine with a deadline of seconds; an engine
that is down answers only at that deadline. Read in the engine's own thread, every round
would wait for it; here a reader thread asks every `refresh_s` and posts what it read
(`CapacityRead`) to the engine, which decides on the latest answer. The first read is at
once, so a pool that starts admits its backends' jobs within a round of the engine's
answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from gpupool.core.backends import Backend, Capacity
from gpupool.engine.events import CapacityRead

log = logging.getLogger("gpupool.engine")

DEFAULT_REFRESH_S = 5.0


class CapacityReader:
    def __init__(
        self,
        backends: Mapping[str, Backend],
        post: Callable[[CapacityRead], None],
        refresh_s: float = DEFAULT_REFRESH_S,
    ) -> None:
        self._backends = dict(backends)
        self._post = post
        self._refresh_s = refresh_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self._backends:
            return
        self._thread = threading.Thread(target=self._run, name="gpupool-capacity", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def read_now(self) -> None:
        """Ask every backend once and post each answer (what each round of the thread does)."""
        for name, backend in self._backends.items():
            try:
                capacity = backend.capacity()
            except Exception as exc:  # the contract says never; a bug still costs one read
                log.exception("backend %s: reading its capacity failed", name)
                capacity = Capacity(problem=f"reading its capacity failed: {exc}")
            self._post(CapacityRead(name, capacity))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.read_now()
            self._stop.wait(self._refresh_s)
