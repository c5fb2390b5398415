"""Where the last N lines of a log start (`gpupool logs --tail N`, as `tail -n N`).

Read backwards from the end a block at a time, counting newlines; a last line without its
newline counts as a line. Pure over a reader, so it is tested without files.
"""

from __future__ import annotations

from collections.abc import Callable

BLOCK = 64 * 1024
MAX_TAIL_LINES = 1_000_000


def tail_offset(read: Callable[[int, int], bytes], size: int, lines: int) -> int:
    """The offset at which the last `lines` lines of a log of `size` bytes begin; `read(
    offset, limit)` gives its bytes. 0 lines: the end (a follow shows only what comes)."""
    if lines <= 0 or size <= 0:
        return max(size, 0)
    end = size
    last = read(size - 1, 1)
    wanted = lines + 1 if last == b"\n" else lines  # the final newline ends the last line
    found = 0
    while end > 0:
        start = max(0, end - BLOCK)
        block = read(start, end - start)
        i = len(block)
        while True:
            i = block.rfind(b"\n", 0, i)
            if i < 0:
                break
            found += 1
            if found == wanted:
                return start + i + 1
        end = start
    return 0
