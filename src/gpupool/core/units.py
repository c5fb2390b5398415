"""Parsing and formatting of sizes and durations as users type them (Slurm-style and human)."""

from __future__ import annotations

import math
import re

# One convention with `plan` (docs/jobs.md "Sizes and GPU names"): KB/MB/GB/TB are decimal
# (SI, as vendors and `plan` write them), KiB/MiB/GiB/TiB binary, each as written; a bare
# K/M/G/T is binary, as Slurm's --mem=32G. Until issue 30 (item 17) GB meant GiB here.
_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 10**3,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MB": 10**6,
    "MIB": 1 << 20,
    "G": 1 << 30,
    "GB": 10**9,
    "GIB": 1 << 30,
    "T": 1 << 40,
    "TB": 10**12,
    "TIB": 1 << 40,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int | float) -> int:
    """Bytes from '80GB', '20GiB', '512M', '1.5T' or a plain number of bytes.

    GB is 10**9 bytes and GiB 2**30 (MB, KB, TB alike), case aside; a bare G (M, K, T) is
    2**30, as Slurm reads --mem=32G.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"size must not be negative: {text!r}")
        return int(text)
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 80GB, 512MiB, 1.5T)")
    unit = m.group(2).upper()
    if unit not in _SIZE_UNITS:
        raise ValueError(f"unknown size unit {m.group(2)!r} in {text!r} (use K, M, G, T)")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def format_size(n: int) -> str:
    """'80GiB', '512MiB', '1.5TiB': the shortest exact-enough binary form (the one way the
    pool prints a size; `20GB` asked prints as 18.6GiB, the same bytes)."""
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            value = n / factor
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{n}B"


# "ms" before "m": alternation takes the first that matches, and "500ms" is not 500 minutes.
_HUMAN_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|d|h|m|s)", re.IGNORECASE)
_HUMAN_FULL_RE = re.compile(r"^\s*(?:\d+(?:\.\d+)?\s*(?:ms|d|h|m|s)\s*)+$", re.IGNORECASE)
_HUMAN_FACTORS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str | int | float) -> float:
    """Seconds from '2h', '1h30m', '90s', '1d', or Slurm's forms.

    Slurm forms (as in sbatch --time): 'MM' (minutes), 'MM:SS', 'HH:MM:SS', 'D-HH',
    'D-HH:MM', 'D-HH:MM:SS'. A bare number is minutes, as in Slurm.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, (int, float)):
        if text <= 0:
            raise ValueError(f"duration must be positive: {text!r}")
        try:
            return float(text) * 60.0
        except OverflowError:  # an int past any float: as long as can be (callers cap it)
            return math.inf
    s = text.strip()
    if s.startswith("-") and s[1:2].isdigit():  # `--time -5m`: say what is wrong with it
        raise ValueError(f"duration must be positive: {text!r}")
    seconds: float
    if _HUMAN_FULL_RE.match(s):
        seconds = sum(float(v) * _HUMAN_FACTORS[u.lower()] for v, u in _HUMAN_RE.findall(s))
    else:
        seconds = _parse_slurm_time(s, text)
    if seconds <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    return seconds


def _parse_slurm_time(s: str, original: str) -> float:
    err = ValueError(
        f"not a duration: {original!r} (examples: 2h, 1h30m, 90s, 1-12:00:00, 30 for 30 minutes)"
    )
    days = 0
    if "-" in s:
        d, _, s = s.partition("-")
        if not d.isdigit():
            raise err
        days = int(d)
        parts = s.split(":")
        if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
            raise err
        h, m, sec = ([int(p) for p in parts] + [0, 0])[:3]
        return days * 86400.0 + h * 3600 + m * 60 + sec
    parts = s.split(":")
    if not all(p.replace(".", "", 1).isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        raise err
    nums = [float(p) for p in parts]
    if len(nums) == 1:
        return nums[0] * 60.0
    if len(nums) == 2:
        return nums[0] * 60.0 + nums[1]
    return nums[0] * 3600.0 + nums[1] * 60.0 + nums[2]


def format_duration(seconds: float | None) -> str:
    """'1d2h', '2h05m', '3m20s', '42s' for tables; '-' for None."""
    if seconds is None:
        return "-"
    s = int(round(max(seconds, 0.0)))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d{h}h"
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{s:02d}s"
    return f"{s}s"


def plural(count: float, noun: str, nouns: str | None = None) -> str:
    """'1 GPU', '2 GPUs', '0.5 GPU' (a fraction of one), '1 project', '3 jobs'."""
    many = nouns if nouns is not None else f"{noun}s"
    shown = str(int(count)) if float(count).is_integer() else f"{count:g}"
    return f"{shown} {noun if 0 < count <= 1 else many}"
