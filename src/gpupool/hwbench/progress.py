"""Progress bars for benchmarks (the `Progress` protocol of result.py), standard library only.

`Bar` draws one line on a terminal (`matmul [#######.....] 7/12`), redrawn in place with a
carriage return, and prints nothing when its stream is not a terminal: a pool job's log, a
pipe or CI gets no control characters. `Quiet` says nothing (tests, `--json` runs).
"""

from __future__ import annotations

from typing import TextIO

WIDTH = 30


class Quiet:
    def start(self, total: int, what: str) -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        pass


class Bar:
    def __init__(self, stream: TextIO, enabled: bool | None = None) -> None:
        self.stream = stream
        self.enabled = stream.isatty() if enabled is None else enabled
        self.total = 0
        self.done = 0
        self.what = ""

    def start(self, total: int, what: str) -> None:
        self.finish()
        self.total, self.done, self.what = max(total, 0), 0, what
        self._draw()

    def advance(self, steps: int = 1) -> None:
        self.done = min(self.done + steps, self.total)
        self._draw()
        if self.total and self.done >= self.total:
            self.finish()

    def finish(self) -> None:
        """End the line of a bar being drawn (the next output starts on a line of its own)."""
        if self.enabled and self.what:
            self.stream.write("\n")
            self.stream.flush()
        self.what = ""

    def _draw(self) -> None:
        if not self.enabled or not self.what:
            return
        filled = WIDTH * self.done // self.total if self.total else WIDTH
        bar = "#" * filled + "." * (WIDTH - filled)
        self.stream.write(f"\r{self.what} [{bar}] {self.done}/{self.total}")
        self.stream.flush()
