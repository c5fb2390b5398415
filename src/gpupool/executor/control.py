"""Orders for a running job's supervisor: a new time limit, a signal for its processes.

The daemon writes them to JOBDIR/control.json (atomically: the supervisor reads the old
orders or the new, never a torn file) and sends the supervisor the signal its claim names
(`control_signal`, SIGHUP); the supervisor reads the file at once and on each such signal
(executor/supervisor.py, `wait`). Signals are kept as a numbered list, so two sent between
two reads are both delivered, each once; the last `KEPT_SIGNALS` are kept. The file is one
of a run's control files: a requeued job's next attempt starts without it.

A supervisor older than these orders names no `control_signal` and is never sent one
(`orders_taken` is False): the request is refused rather than lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gpupool.executor.files import atomic_write_json, read_json

CONTROL_FILE = "control.json"
KEPT_SIGNALS = 64


def control_signal(claim: Mapping[str, object]) -> int | None:
    """The signal on which the claim's supervisor reads its orders (None: it reads none)."""
    sig = claim.get("control_signal")
    return sig if isinstance(sig, int) and not isinstance(sig, bool) else None


def write_orders(
    jobdir: Path, *, time_limit_s: float | None = None, signum: int | None = None
) -> None:
    """Add an order to the run's control file: a time limit (from the run's start) that
    replaces the one it runs under, and/or a signal to send once."""
    path = jobdir / CONTROL_FILE
    current = read_json(path) or {}
    orders: dict[str, object] = {}
    limit = current.get("time_limit_s")
    if isinstance(limit, (int, float)):
        orders["time_limit_s"] = float(limit)
    if time_limit_s is not None:
        orders["time_limit_s"] = float(time_limit_s)
    signals = [
        [int(seq), int(sig)]
        for seq, sig in (current.get("signals") or [])
        if isinstance(seq, int) and isinstance(sig, int)
    ]
    if signum is not None:
        seq = signals[-1][0] + 1 if signals else 1
        signals = [*signals, [seq, int(signum)]][-KEPT_SIGNALS:]
    if signals:
        orders["signals"] = signals
    atomic_write_json(path, orders)
