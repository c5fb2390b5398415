"""Known GPU models and how much memory each has, and matching of GPU-type requests.

The catalog lets people declare GPUs by model name alone ("8xH100") and lets the
scheduler compare a requested type (--gpu-type A100-80GB) with whatever model string
a node reports: a declared one ("A100-80GB") or NVML's ("NVIDIA A100-SXM4-80GB").

Names (docs/jobs.md "Sizes and GPU names"): each model has one spelling, `GpuModel.name`,
the vendor's ("H100-PCIe", "RTX 4090"), the same as plan/data/catalog.yaml's; the inventory,
the pool's messages and `plan` print it, and any spelling that differs only in case, spaces,
dashes or brand words ("rtx4090", "GeForce RTX 4090") is read as it. A size in a model name
is the vendor's label for its memory in GiB ("A100-80GB" has 80 GiB, as NVML reports it;
"MYGPU-48GB" declares 48 GiB), not a size as `--gpu-memory` reads one (core.units).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_GIB = 1 << 30


@dataclass(frozen=True)
class GpuModel:
    name: str  # the one spelling gpupool prints, and writes in Gpu.model for a declared GPU
    memory_gib: float
    aliases: tuple[str, ...] = ()  # other spellings, e.g. the name NVML reports


# Nominal memory as sold; NVML's exact totals differ by a few hundred MiB.
CATALOG: tuple[GpuModel, ...] = (
    GpuModel("A100-40GB", 40, ("A100-SXM4-40GB", "A100-PCIE-40GB")),
    GpuModel("A100-80GB", 80, ("A100-SXM4-80GB", "A100 80GB PCIe")),
    GpuModel("H100", 80),
    GpuModel("H100-SXM", 80, ("H100 80GB HBM3", "H100-SXM5-80GB")),
    GpuModel("H100-PCIe", 80),
    GpuModel("H100-NVL", 94),
    GpuModel("H200", 141),
    GpuModel("B200", 192),
    GpuModel("V100-16GB", 16, ("V100-SXM2-16GB", "V100-PCIE-16GB")),
    GpuModel("V100-32GB", 32, ("V100-SXM2-32GB", "V100-PCIE-32GB")),
    GpuModel("V100", 32),
    GpuModel("L40S", 48),
    GpuModel("L40", 48),
    GpuModel("L4", 24),
    GpuModel("A10", 24),
    GpuModel("A10G", 24),
    GpuModel("A30", 24),
    GpuModel("A40", 48),
    GpuModel("T4", 16),
    GpuModel("RTX A6000", 48, ("A6000",)),
    GpuModel("RTX 4090", 24),
    GpuModel("RTX 3090", 24),
    GpuModel("RTX 2080 Ti", 11),
    GpuModel("GTX 1080 Ti", 11),
    GpuModel("MI300X", 192),
)

# A bare family name that comes in several sizes: the error says which to write.
_AMBIGUOUS = {"A100": ("A100-40GB", "A100-80GB")}

# Brand words that carry no information about which GPU it is.
_VENDOR_WORDS = frozenset({"NVIDIA", "TESLA", "GEFORCE", "QUADRO", "AMD", "INSTINCT"})
_SPLIT_RE = re.compile(r"[\s\-_/]+")
_MEMORY_TOKEN_RE = re.compile(r"^(\d+(?:\.\d+)?)(?:GB|GIB|G)$")
# A separator is required, so "H100G" is not read as a 100 GB GPU.
_SIZE_SUFFIX_RE = re.compile(r"^(.+?)[\s\-_]+(\d+(?:\.\d+)?)\s*(?:GB|GIB)$", re.IGNORECASE)


def _tokens(text: str) -> list[str]:
    """Upper-case words of a model name, brand words dropped."""
    return [t for t in _SPLIT_RE.split(text.strip().upper()) if t and t not in _VENDOR_WORDS]


def _compact(text: str) -> str:
    return "".join(_tokens(text))


_BY_KEY: dict[str, GpuModel] = {}
for _m in CATALOG:
    for _spelling in (_m.name, *_m.aliases):
        _BY_KEY[_compact(_spelling)] = _m


def known_model_names() -> list[str]:
    return [m.name for m in CATALOG]


def lookup(model: str) -> GpuModel | None:
    """The catalog entry for a model name, ignoring case, spaces, dashes and "NVIDIA "."""
    return _BY_KEY.get(_compact(model))


@lru_cache(maxsize=256)
def display_name(requested: str) -> str:
    """How messages write a requested GPU type: the catalog's name for a known model
    ("nvidia a100-sxm4-80gb" -> "A100-80GB"), else the request's words as the catalog writes
    names, brand words dropped ("a100" -> "A100", "mygpu 5" -> "MYGPU-5"). Never the user's
    spelling as typed: one type reads the same in every message. Cached: pass messages ask."""
    entry = lookup(requested)
    if entry is not None:
        return entry.name
    return "-".join(_tokens(requested)) or requested.strip()


def ambiguity_hint(model: str) -> str:
    """Advice for a family name that needs a size, e.g. "A100" -> "write A100-40GB or ..."."""
    options = _AMBIGUOUS.get(_compact(model))
    return f"{model} comes in several sizes: write {' or '.join(options)}" if options else ""


def memory_from_name(model: str) -> int | None:
    """Bytes from an explicit "-<N>GB" suffix, e.g. "MYGPU-48GB" -> 48 GiB (a name's size is
    the vendor's label, in GiB: module docstring); None without one."""
    m = _SIZE_SUFFIX_RE.match(model.strip())
    if not m:
        return None
    return int(float(m.group(2)) * _GIB)


def catalog_memory_bytes(model: str) -> int | None:
    """Memory of a model: the catalog first, then an explicit size in the name."""
    entry = lookup(model)
    if entry is not None:
        return int(entry.memory_gib * _GIB)
    return memory_from_name(model)


def _split_memory(tokens: list[str]) -> tuple[list[str], float | None]:
    rest: list[str] = []
    memory: float | None = None
    for t in tokens:
        m = _MEMORY_TOKEN_RE.match(t)
        if m:
            memory = float(m.group(1))
        else:
            rest.append(t)
    return rest, memory


def _family_in(requested: str, model_tokens: list[str]) -> bool:
    """Whether the requested family (compacted) is a run of whole words of the model name.

    Whole words keep "A10" from matching "A100" and "L4" from matching "L40S". A trailing
    form-factor word may omit its generation digits: "H100-SXM" matches "H100-SXM5".
    """
    for start in range(len(model_tokens)):
        run = ""
        for t in model_tokens[start:]:
            run += t
            if run == requested:
                return True
            if (
                run.startswith(requested)
                and run[len(requested) :].isdigit()
                and requested[-1].isalpha()
                and len(run) - len(t) < len(requested)  # the extra digits are in the last word
            ):
                return True
            if len(run) >= len(requested):
                break
    return False


def model_matches(requested: str, model: str, memory_bytes: int | None = None) -> bool:
    """Whether a GPU of `model` satisfies a request for GPU type `requested`.

    Case, spaces, dashes and brand words ("NVIDIA", "Tesla", "GeForce") are ignored.
    The family must match whole words: "A100" matches "A100-SXM4-80GB" and "A100-80GB",
    not "A10". A size in the request must match the GPU's: taken from the model name,
    else `memory_bytes` (within 8%, since NVML reports a little less than the nominal
    size), else the catalog; when none of those knows the size, it does not match.
    """
    req_tokens, req_memory = _split_memory(_tokens(requested))
    if not req_tokens:
        return False
    # NVML names some models without a form factor ("H100 80GB HBM3" is the SXM part):
    # also try the catalog's canonical name, so "H100-SXM" finds it.
    entry = lookup(model)
    candidates = [model] + ([entry.name] if entry is not None else [])
    family = "".join(req_tokens)
    if not any(_family_in(family, _split_memory(_tokens(c))[0]) for c in candidates):
        return False
    if req_memory is None:
        return True
    _, name_memory = _split_memory(_tokens(model))
    if name_memory is not None:
        return name_memory == req_memory
    if memory_bytes:
        return abs(memory_bytes / _GIB - req_memory) <= 0.08 * req_memory
    if entry is not None:
        return entry.memory_gib == req_memory
    return False
