"""The hardware catalog: GPUs, servers, interconnects and cloud prices, each figure sourced.

The figures live in data/catalog.yaml (data, not code). Every entry carries a `source` and an
`as_of` date that cover all its figures, plus an optional `sources:` map for the figures that
came from elsewhere (typically a price). A user's override file (`--catalog FILE.yaml`, same
schema) replaces entries with the same name and adds new ones; it is validated as strictly as
the built-in file, so a typo names the file, the entry and the field instead of surfacing as a
wrong number later.

Units are decimal SI: GB = 1e9 bytes, GB/s = 1e9 bytes/s, TFLOPS = 1e12 FLOP/s (dense, i.e.
without the 2:4 structured-sparsity doubling vendors often headline).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from gpupool.plan.quantity import PlanError


@dataclass(frozen=True)
class Sourced:
    """Where a figure comes from, and when it was true (prices and specs change)."""

    source: str
    as_of: str  # "YYYY-MM" or "YYYY-MM-DD"


@dataclass(frozen=True)
class GpuSpec:
    name: str
    vendor: str
    aliases: tuple[str, ...]
    memory_gb: float
    memory_bandwidth_gbs: float
    bf16_tflops: float | None  # dense tensor-core BF16; None where the GPU has none (V100)
    fp16_tflops: float  # dense tensor-core FP16 (plain FP16 rate where there are no tensor cores)
    fp32_tflops: float
    nvlink_gbs: float  # total NVLink bandwidth per GPU as the vendor quotes it; 0 = none
    pcie_gen: int
    tdp_w: float
    price_usd: float | None
    sources: Mapping[str, Sourced]  # per figure; "*" is the default for all figures

    def peak_tflops(self, precision: str = "bf16") -> float:
        """Dense peak for training at `precision`; BF16 falls back to FP16 (same tensor cores)."""
        p = precision.lower()
        if p == "bf16":
            return self.bf16_tflops if self.bf16_tflops is not None else self.fp16_tflops
        if p == "fp16":
            return self.fp16_tflops
        if p == "fp32":
            return self.fp32_tflops
        raise PlanError(f"precision: expected bf16, fp16 or fp32, got {precision!r}")

    def source_of(self, field: str) -> Sourced:
        return _source_of(self.sources, field)


@dataclass(frozen=True)
class ServerSpec:
    name: str
    gpu: str  # the catalog GPU's canonical name
    gpus: int
    max_power_kw: float  # the vendor's maximum system draw (what circuits are sized for)
    price_usd: float | None
    sources: Mapping[str, Sourced]

    def source_of(self, field: str) -> Sourced:
        return _source_of(self.sources, field)


@dataclass(frozen=True)
class InterconnectSpec:
    name: str
    kind: str  # "pcie" | "nvlink" | "infiniband" | "ethernet"
    bandwidth_gbs: float  # usable GB/s per direction per GPU/port: what a ring all-reduce sees
    latency_us: float
    sources: Mapping[str, Sourced]

    def source_of(self, field: str) -> Sourced:
        return _source_of(self.sources, field)


@dataclass(frozen=True)
class CloudPrice:
    name: str  # e.g. "aws-p4d.24xlarge"
    provider: str
    instance: str
    gpu: str  # the catalog GPU's canonical name
    gpus: int
    usd_per_hour: float  # for the whole instance
    pricing: str  # "on-demand", "reserved-1y", ...
    sources: Mapping[str, Sourced]

    def source_of(self, field: str) -> Sourced:
        return _source_of(self.sources, field)


def _source_of(sources: Mapping[str, Sourced], field: str) -> Sourced:
    return sources.get(field) or sources["*"]


# Brand words carry no information about which GPU it is ("NVIDIA A100-SXM4-80GB").
_BRAND_WORDS = frozenset({"NVIDIA", "TESLA", "GEFORCE", "QUADRO", "AMD", "INSTINCT"})
_SEPARATORS = re.compile(r"[\s\-_]+")


def name_key(name: str) -> str:
    """How names compare: case, '-', ' ', '_' and brand words ignored ('a100 80gb' = 'A100-80GB')."""
    words = _SEPARATORS.split(name.strip().upper())
    return "".join(w for w in words if w and w not in _BRAND_WORDS)


E = TypeVar("E")


def _find(entries: tuple[E, ...], name: str, what: str, keys: Callable[[E], tuple[str, ...]]) -> E:
    wanted = name_key(name)
    for entry in entries:
        if wanted in {name_key(k) for k in keys(entry)}:
            return entry
    known = ", ".join(keys(e)[0] for e in entries)
    raise PlanError(f"unknown {what} {name!r}; the catalog has: {known}")


@dataclass(frozen=True)
class Catalog:
    gpus: tuple[GpuSpec, ...]
    servers: tuple[ServerSpec, ...]
    interconnects: tuple[InterconnectSpec, ...]
    clouds: tuple[CloudPrice, ...]

    def gpu(self, name: str) -> GpuSpec:
        return _find(self.gpus, name, "GPU", lambda g: (g.name, *g.aliases))

    def server(self, name: str) -> ServerSpec:
        return _find(self.servers, name, "server", lambda s: (s.name,))

    def interconnect(self, name: str) -> InterconnectSpec:
        return _find(self.interconnects, name, "interconnect", lambda i: (i.name,))

    def cloud(self, name: str) -> CloudPrice:
        return _find(self.clouds, name, "cloud instance", lambda c: (c.name,))


# --- the file format -----------------------------------------------------------------------

# Field kinds: "str", "strs" (list of strings), "num" (> 0), "num0" (>= 0), "num?" (> 0 or
# null), "int" (>= 1). The order is the dataclass's; `source`, `as_of`, `sources` are extra.
_SCHEMA: dict[str, tuple[type[Any], dict[str, str]]] = {
    "gpus": (
        GpuSpec,
        {
            "name": "str",
            "vendor": "str",
            "aliases": "strs",
            "memory_gb": "num",
            "memory_bandwidth_gbs": "num",
            "bf16_tflops": "num?",
            "fp16_tflops": "num",
            "fp32_tflops": "num",
            "nvlink_gbs": "num0",
            "pcie_gen": "int",
            "tdp_w": "num",
            "price_usd": "num?",
        },
    ),
    "servers": (
        ServerSpec,
        {"name": "str", "gpu": "str", "gpus": "int", "max_power_kw": "num", "price_usd": "num?"},
    ),
    "interconnects": (
        InterconnectSpec,
        {"name": "str", "kind": "str", "bandwidth_gbs": "num", "latency_us": "num0"},
    ),
    "clouds": (
        CloudPrice,
        {
            "name": "str",
            "provider": "str",
            "instance": "str",
            "gpu": "str",
            "gpus": "int",
            "usd_per_hour": "num",
            "pricing": "str",
        },
    ),
}
SECTIONS = tuple(_SCHEMA)
INTERCONNECT_KINDS = ("pcie", "nvlink", "infiniband", "ethernet")
# Fields that are not figures and so need no source.
_NOT_FIGURES = frozenset({"name", "aliases"})
_OPTIONAL = frozenset({"aliases"})
_DATE_FORMATS = ("%Y-%m-%d", "%Y-%m")


def _check_value(kind: str, value: Any, where: str) -> Any:
    """The value converted to its field's type, or a PlanError saying what was expected."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "str":
        if not isinstance(value, str) or not value.strip():
            raise PlanError(f"{where}: expected a non-empty string, got {value!r}")
        return value.strip()
    if kind == "strs":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise PlanError(f"{where}: expected a list of names, got {value!r}")
        return tuple(value)
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise PlanError(f"{where}: expected a whole number >= 1, got {value!r}")
        return value
    if kind == "num?" and value is None:
        return None
    if not is_number:
        raise PlanError(f"{where}: expected a number, got {value!r}")
    if kind == "num0" and value < 0:
        raise PlanError(f"{where}: must not be negative, got {value!r}")
    if kind in ("num", "num?") and not value > 0:
        raise PlanError(f"{where}: must be positive, got {value!r}")
    return float(value)


def _check_date(value: Any, where: str) -> str:
    # YAML reads an unquoted 2020-05-14 as a date; 2020-05 stays a string.
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        for fmt in _DATE_FORMATS:
            try:
                dt.datetime.strptime(value, fmt)
                return value
            except ValueError:
                pass
    raise PlanError(f"{where}: expected a date YYYY-MM or YYYY-MM-DD, got {value!r}")


def _check_sourced(raw: Any, where: str) -> Sourced:
    if not isinstance(raw, dict):
        raise PlanError(f"{where}: expected a mapping with source and as_of, got {raw!r}")
    unknown = sorted(set(raw) - {"source", "as_of"})
    if unknown:
        raise PlanError(f"{where}.{unknown[0]}: unknown field (expected source, as_of)")
    for key in ("source", "as_of"):
        if raw.get(key) is None:
            raise PlanError(f"{where}.{key}: missing (every figure needs a source and a date)")
    source = _check_value("str", raw["source"], f"{where}.source")
    return Sourced(source, _check_date(raw["as_of"], f"{where}.as_of"))


def _parse_entry(section: str, raw: Any, where: str) -> Any:
    cls, fields = _SCHEMA[section]
    if not isinstance(raw, dict):
        raise PlanError(f"{where}: expected a mapping of fields, got {raw!r}")
    allowed = set(fields) | {"source", "as_of", "sources"}
    unknown = sorted(str(k) for k in set(raw) - allowed)
    if unknown:
        raise PlanError(f"{where}.{unknown[0]}: unknown field (known: {', '.join(fields)})")
    values: dict[str, Any] = {}
    for field, kind in fields.items():
        if field not in raw:
            if field in _OPTIONAL:
                values[field] = ()
                continue
            raise PlanError(f"{where}.{field}: missing")
        values[field] = _check_value(kind, raw[field], f"{where}.{field}")
    sources = {"*": _check_sourced({k: raw.get(k) for k in ("source", "as_of")}, where)}
    extra = raw.get("sources") or {}
    if not isinstance(extra, dict):
        raise PlanError(f"{where}.sources: expected a mapping of field -> source, as_of")
    for field, sourced in extra.items():
        if field not in fields or field in _NOT_FIGURES:
            raise PlanError(f"{where}.sources.{field}: not a figure of this entry")
        sources[str(field)] = _check_sourced(sourced, f"{where}.sources.{field}")
    if section == "interconnects" and values["kind"] not in INTERCONNECT_KINDS:
        raise PlanError(f"{where}.kind: expected one of {', '.join(INTERCONNECT_KINDS)}")
    return cls(sources=sources, **values)


def parse_catalog_text(text: str, label: str) -> dict[str, list[tuple[Any, str]]]:
    """Each section's entries with where each came from ('label: gpus[2]'), validated."""
    import yaml  # pyyaml: allowed in this module only

    # The C loader when PyYAML was built with libyaml: the built-in file loads 5x faster.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(text, Loader=loader)  # a safe loader either way
    except yaml.YAMLError as e:
        raise PlanError(f"{label}: not valid YAML: {e}".splitlines()[0]) from None
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise PlanError(f"{label}: expected a mapping with sections {', '.join(SECTIONS)}")
    out: dict[str, list[tuple[Any, str]]] = {s: [] for s in SECTIONS}
    for section, entries in doc.items():
        if section not in _SCHEMA:
            raise PlanError(f"{label}: {section}: unknown section (known: {', '.join(SECTIONS)})")
        if not isinstance(entries, list):
            raise PlanError(f"{label}: {section}: expected a list of entries")
        seen: set[str] = set()
        for i, raw in enumerate(entries):
            where = f"{label}: {section}[{i}]"
            entry = _parse_entry(section, raw, where)
            if name_key(entry.name) in seen:
                raise PlanError(f"{where}.name: {entry.name!r} appears twice in {section}")
            seen.add(name_key(entry.name))
            out[section].append((entry, where))
    return out


def _merge(
    base: dict[str, list[tuple[Any, str]]], override: dict[str, list[tuple[Any, str]]]
) -> dict[str, list[tuple[Any, str]]]:
    """Override entries replace same-named base entries in place; new names go at the end.

    A replacing entry keeps the base entry's spelling of the name and its aliases (its own
    aliases are added), so a pool's GPU strings and other entries' references still resolve
    after, say, an override that only corrects a price."""
    merged: dict[str, list[tuple[Any, str]]] = {}
    for section in SECTIONS:
        entries = list(base[section])
        index = {name_key(e.name): i for i, (e, _) in enumerate(entries)}
        for entry, where in override[section]:
            key = name_key(entry.name)
            if key in index:
                old = entries[index[key]][0]
                keep: dict[str, Any] = {"name": old.name}
                if section == "gpus":
                    keep["aliases"] = tuple(dict.fromkeys((*entry.aliases, *old.aliases)))
                entries[index[key]] = (dataclasses.replace(entry, **keep), where)
            else:
                index[key] = len(entries)
                entries.append((entry, where))
        merged[section] = entries
    return merged


def _build(parts: dict[str, list[tuple[Any, str]]]) -> Catalog:
    """The catalog, with each server's and cloud's GPU resolved to its canonical name."""
    gpus = tuple(e for e, _ in parts["gpus"])
    by_gpu = Catalog(gpus, (), (), ())
    resolved: dict[str, tuple[Any, ...]] = {}
    for section in ("servers", "clouds"):
        out = []
        for entry, where in parts[section]:
            try:
                gpu = by_gpu.gpu(entry.gpu)
            except PlanError as e:
                raise PlanError(f"{where}.gpu: {e}") from None
            out.append(dataclasses.replace(entry, gpu=gpu.name))
        resolved[section] = tuple(out)
    return Catalog(
        gpus=gpus,
        servers=resolved["servers"],
        interconnects=tuple(e for e, _ in parts["interconnects"]),
        clouds=resolved["clouds"],
    )


BUILTIN_LABEL = "built-in catalog.yaml"


@functools.cache
def _builtin_parts() -> dict[str, list[tuple[Any, str]]]:
    text = resources.files("gpupool.plan").joinpath("data/catalog.yaml").read_text("utf-8")
    return parse_catalog_text(text, BUILTIN_LABEL)


def load_catalog(override: Path | None = None) -> Catalog:
    """The built-in catalog, with `override` (a YAML file of the same schema) applied."""
    parts = _builtin_parts()
    if override is not None:
        try:
            text = Path(override).read_text(encoding="utf-8")
        except OSError as e:
            raise PlanError(f"--catalog: cannot read {str(override)!r}: {e.strerror}") from None
        parts = _merge(parts, parse_catalog_text(text, str(override)))
    return _build(parts)
