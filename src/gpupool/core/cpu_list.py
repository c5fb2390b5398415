"""CPU sets as Linux and nvidia-smi write them: "0-15,32-47" (a cpulist), and as NVML's
affinity bitmasks. A GPU's CPU affinity is held as a sorted tuple of CPU ids; these turn
it into text and back, exactly (format_cpu_list(parse_cpu_list(t)) is t in canonical form).
"""

from __future__ import annotations


def format_cpu_list(cpus: tuple[int, ...] | list[int] | frozenset[int]) -> str:
    """Ascending ranges, comma-separated: (0, 1, 2, 3, 8) -> "0-3,8"; empty -> ""."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    start = prev = ordered[0] if ordered else 0
    for cpu in ordered[1:]:
        if cpu != prev + 1:
            ranges.append(_range(start, prev))
            start = cpu
        prev = cpu
    if ordered:
        ranges.append(_range(start, prev))
    return ",".join(ranges)


def _range(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """The CPU ids of a cpulist ("0-15,32-47", "3", "" or a trailing newline as sysfs
    writes it), sorted and without repeats; ValueError names what is wrong."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        first, sep, last = part.partition("-")
        try:
            lo = int(first)
            hi = int(last) if sep else lo
        except ValueError:
            raise ValueError(f"not a CPU list: {text.strip()!r} (e.g. 0-15,32-47)") from None
        if lo < 0 or hi < lo:
            whole = "" if part == text.strip() else f" in {text.strip()!r}"
            raise ValueError(f"not a CPU range: {part!r}{whole} (first-last, ascending)")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def cpus_of_masks(words: list[int] | tuple[int, ...], bits_per_word: int = 64) -> tuple[int, ...]:
    """The CPUs whose bits are set in NVML's affinity array: word i, bit j is CPU
    i * bits_per_word + j (nvmlDeviceGetCpuAffinity fills 64-bit words on Linux)."""
    return tuple(
        i * bits_per_word + j
        for i, word in enumerate(words)
        for j in range(bits_per_word)
        if int(word) >> j & 1
    )
