"""Numbers as planners type them: 7.5e9, 175B, 12.1M parameters; 10GB/s, 100Gb/s, 400Gbps.

Decimal SI: 1 GB = 1e9 bytes; a lower-case b means bits (100Gb/s = 12.5 GB/s).
"""

from __future__ import annotations

import math
import re


class PlanError(ValueError):
    """A planning input that cannot be used; the message names the flag or field."""


_COUNT_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_COUNT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KkMmBbGgTt]?)\s*$")
_RATE_RE = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKMGT]?)([Bb]?)(?:/s|ps)?\s*$"
)
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def parse_count(text: str | float | int, what: str = "value") -> float:
    """A plain or suffixed count: '7.5e9', '175B' (billion), '12.1M', '25557032'."""
    if isinstance(text, bool):
        raise PlanError(f"{what}: not a number: {text!r}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _COUNT_RE.match(text)
        if not m:
            raise PlanError(f"{what}: not a number: {text!r} (examples: 7.5e9, 175B, 12.1M)")
        value = float(m.group(1)) * _COUNT_SUFFIX[m.group(2).upper()]
    if value < 0:
        raise PlanError(f"{what}: must not be negative, got {text!r}")
    if not math.isfinite(value):  # 1e400 reads as inf
        raise PlanError(f"{what}: too large, got {text!r}")
    return value


def parse_bandwidth(text: str | float | int, what: str = "bandwidth") -> float:
    """Bytes per second from '10GB/s', '100Gb/s', '400Gbps' (bits) or a plain number of GB/s."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text) * 1e9
    else:
        m = _RATE_RE.match(str(text))
        if not m:
            raise PlanError(
                f"{what}: not a bandwidth: {text!r} (examples: 10GB/s, 100Gb/s, 400Gbps)"
            )
        number, prefix, unit = float(m.group(1)), m.group(2), m.group(3)
        if not prefix and not unit:
            value = number * 1e9  # a bare number is GB/s, the unit every table here uses
        else:
            value = number * _PREFIX[prefix] / (8.0 if unit == "b" else 1.0)
    if value <= 0:
        raise PlanError(f"{what}: must be positive, got {text!r}")
    if not math.isfinite(value):
        raise PlanError(f"{what}: too large, got {text!r}")
    return value
