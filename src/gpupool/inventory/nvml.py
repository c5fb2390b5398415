"""Discovery of this machine's NVIDIA GPUs and their topology through NVML (pynvml).

What is read and how it maps onto LinkKind is written up in docs/nvml.md. In short:
names, UUIDs, memory, PCI bus ids, NUMA nodes and CPU affinity per GPU; per pair, NVLink when active
NVLinks connect them (directly, or both to NVSwitches), else NVML's common PCIe ancestor.

Any call that a GPU or driver does not support (NotSupported, FunctionNotFound) degrades
to less knowledge, never to a failure: no NVLink info -> the PCIe topology is used, no
topology -> SYS, the worst, so placement is at worst pessimistic. Other NVML errors raise
DiscoveryError: guessing a GPU's identity would hand jobs the wrong device.
"""

from __future__ import annotations

import importlib
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpupool.core import gpu_catalog as catalog
from gpupool.core.cpu_list import cpus_of_masks, parse_cpu_list
from gpupool.core.hardware import Gpu, Inventory, Link, LinkKind, Node

SYSFS_PCI_DEVICES = Path("/sys/bus/pci/devices")


class DiscoveryError(RuntimeError):
    """NVML could not tell what GPUs this machine has.

    `devices_found` is 0 when NVML is missing, failed to start or sees no GPU; more
    when it saw GPUs but could not read them (then falling back to a demo is wrong).
    """

    def __init__(self, reason: str, *, devices_found: int = 0) -> None:
        self.reason = reason
        self.devices_found = devices_found
        super().__init__(reason)


def _error_classes(nvml: Any, *names: str) -> tuple[type[BaseException], ...]:
    """The NVMLError_* subclasses this module has (the fake or an old pynvml may lack some)."""
    found = tuple(getattr(nvml, n) for n in names if isinstance(getattr(nvml, n, None), type))
    return found


def _unsupported(nvml: Any) -> tuple[type[BaseException], ...]:
    return _error_classes(nvml, "NVMLError_NotSupported", "NVMLError_FunctionNotFound")


def _text(value: Any) -> str:
    """pynvml returns str or bytes depending on its version and on the call."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").strip("\x00 ")
    return str(value).strip()


def _reason(err: BaseException) -> str:
    text = " ".join(str(err).split())  # one line, whatever the library put in it
    return text or type(err).__name__


def normalize_bus_id(bus_id: str) -> str:
    """Linux's form of a PCI address: NVML's "00000000:07:00.0" -> "0000:07:00.0".

    That is the name of the device's directory under /sys/bus/pci/devices, and makes
    bus ids from different NVML calls comparable.
    """
    text = bus_id.strip().lower()
    parts = text.split(":")
    try:
        if len(parts) == 3:
            return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
        if len(parts) == 2:
            return f"0000:{text}"
    except ValueError:
        pass
    return text


def _optional(nvml: Any, default: Any, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except _unsupported(nvml):
        return default


def _numa_node(nvml: Any, handle: Any, bus_id: str, sysfs: Path) -> int | None:
    get = getattr(nvml, "nvmlDeviceGetNumaNodeId", None)  # only in newer drivers/pynvml
    if get is not None:
        try:
            value = int(get(handle))
            return value if value >= 0 else None
        except nvml.NVMLError:
            pass  # not supported here: the kernel knows as well
    if not bus_id:
        return None
    try:
        value = int((sysfs / bus_id / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value >= 0 else None  # -1: a single-node machine or unknown


def _cpu_affinity(nvml: Any, handle: Any, bus_id: str, sysfs: Path, cpus: int) -> tuple[int, ...]:
    """The CPUs nearest the GPU: nvmlDeviceGetCpuAffinity (its NUMA node's CPUs, 64 per
    word: `cpus` sizes the array), else the kernel's local_cpulist; () when neither knows.
    Advisory (shown by `gpupool topo`), so any NVML error here only loses it."""
    get = getattr(nvml, "nvmlDeviceGetCpuAffinity", None)
    if get is not None:
        try:
            found = cpus_of_masks(list(get(handle, max(1, -(-cpus // 64)))))
        except nvml.NVMLError:
            found = ()
        if found:  # an all-zero mask says nothing: ask the kernel
            return found
    if not bus_id:
        return ()
    try:
        return parse_cpu_list((sysfs / bus_id / "local_cpulist").read_text())
    except (OSError, ValueError):
        return ()


def _read_gpu(nvml: Any, index: int, handle: Any, node_name: str, sysfs: Path, cpus: int) -> Gpu:
    name = _text(_optional(nvml, "unknown", nvml.nvmlDeviceGetName, handle))
    uuid = _text(_optional(nvml, "", nvml.nvmlDeviceGetUUID, handle))
    memory_info = _optional(nvml, None, nvml.nvmlDeviceGetMemoryInfo, handle)
    memory = int(memory_info.total) if memory_info is not None else 0
    if not memory:  # e.g. integrated memory reported as unsupported: trust the catalog
        memory = catalog.catalog_memory_bytes(name) or 0
    pci = _optional(nvml, None, nvml.nvmlDeviceGetPciInfo, handle)
    bus_id = normalize_bus_id(_text(pci.busId)) if pci is not None else ""
    return Gpu(
        index=index,
        model=name,
        memory_bytes=memory,
        uuid=uuid or f"GPU-nvml-{node_name}-{index}",
        pci_bus_id=bus_id,
        numa_node=_numa_node(nvml, handle, bus_id, sysfs),
        cpu_affinity=_cpu_affinity(nvml, handle, bus_id, sysfs, cpus),
        device_minor=_device_minor(nvml, handle),
    )


def _device_minor(nvml: Any, handle: Any) -> int | None:
    """The minor number of the GPU's /dev/nvidiaN, or None when NVML does not say."""
    get = getattr(nvml, "nvmlDeviceGetMinorNumber", None)
    if get is None:
        return None
    minor = _optional(nvml, None, get, handle)
    return None if minor is None else int(minor)


def _nvlink_counts(nvml: Any, handles: list[Any], gpus: list[Gpu]) -> dict[tuple[int, int], int]:
    """NVLinks per pair (a < b), direct links and links through NVSwitches.

    Through NVSwitches every GPU reaches every other one with all its switch links, as
    `nvidia-smi topo -m` shows (NV18 everywhere on an HGX H100): the pair gets the
    smaller of the two GPUs' switch-link counts.
    """
    enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
    max_links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))
    type_gpu = getattr(nvml, "NVML_NVLINK_DEVICE_TYPE_GPU", 0)
    type_switch = getattr(nvml, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
    remote_type = getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    # Link numbers past a GPU's last link answer InvalidArgument or NotFound: skip them.
    absent = _unsupported(nvml) + _error_classes(
        nvml, "NVMLError_InvalidArgument", "NVMLError_NotFound"
    )
    by_bus = {g.pci_bus_id: pos for pos, g in enumerate(gpus) if g.pci_bus_id}
    direct: dict[tuple[int, int], int] = {}  # (from, to) -> links seen from `from`
    switch_links = [0] * len(gpus)
    for pos, handle in enumerate(handles):
        for link in range(max_links):
            try:
                if nvml.nvmlDeviceGetNvLinkState(handle, link) != enabled:
                    continue
                remote = normalize_bus_id(
                    _text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
                )
            except absent:
                continue
            kind = None
            if remote_type is not None:
                try:
                    kind = remote_type(handle, link)
                except nvml.NVMLError:
                    kind = None
            peer = by_bus.get(remote)
            if kind is None:
                # Older drivers cannot say what is at the far end: a bus id that is not
                # one of our GPUs is taken to be an NVSwitch (see docs/nvml.md).
                kind = type_gpu if peer is not None else type_switch if remote else None
            if kind == type_gpu and peer is not None and peer != pos:
                direct[(pos, peer)] = direct.get((pos, peer), 0) + 1
            elif kind == type_switch:
                switch_links[pos] += 1
    counts: dict[tuple[int, int], int] = {}
    for a in range(len(gpus)):
        for b in range(a + 1, len(gpus)):
            # Both ends should agree; take the larger in case one end's query failed.
            n = max(direct.get((a, b), 0), direct.get((b, a), 0))
            n += min(switch_links[a], switch_links[b])
            if n:
                counts[(a, b)] = n
    return counts


def _topology_kind(nvml: Any, level: int | None) -> LinkKind:
    """NVML's common-ancestor level -> LinkKind (nvidia-smi topo -m uses the same scale)."""
    if level is None:
        return LinkKind.SYS
    # Thresholds rather than equality, so a level added in a later driver lands on the
    # nearest worse kind instead of failing.
    for limit_name, default, kind in (
        ("NVML_TOPOLOGY_SINGLE", 10, LinkKind.PIX),  # INTERNAL (0) too: same board
        ("NVML_TOPOLOGY_MULTIPLE", 20, LinkKind.PXB),
        ("NVML_TOPOLOGY_HOSTBRIDGE", 30, LinkKind.PHB),
        ("NVML_TOPOLOGY_NODE", 40, LinkKind.NODE),
    ):
        if level <= getattr(nvml, limit_name, default):
            return kind
    return LinkKind.SYS


def _read_node(nvml: Any, node_name: str, sysfs: Path, cpus: int) -> Node:
    count = int(nvml.nvmlDeviceGetCount())
    if count <= 0:
        raise DiscoveryError("NVML sees no GPU")
    handles: list[Any] = []
    gpus: list[Gpu] = []
    for index in range(count):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            handles.append(handle)
            gpus.append(_read_gpu(nvml, index, handle, node_name, sysfs, cpus))
        except nvml.NVMLError as e:
            raise DiscoveryError(
                f"NVML sees {count} GPUs but reading GPU {index} failed: {_reason(e)}",
                devices_found=count,
            ) from e
    try:
        nvlinks = _nvlink_counts(nvml, handles, gpus)
        links: list[Link] = []
        for a in range(count):
            for b in range(a + 1, count):
                if (a, b) in nvlinks:
                    links.append(Link(a, b, LinkKind.NVLINK, nvlinks[(a, b)]))
                    continue
                level = _optional(
                    nvml, None, nvml.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b]
                )
                links.append(Link(a, b, _topology_kind(nvml, level)))
    except nvml.NVMLError as e:
        raise DiscoveryError(
            f"NVML sees {count} GPUs but reading their topology failed: {_reason(e)}",
            devices_found=count,
        ) from e
    return Node(node_name, tuple(gpus), tuple(links))


def discover_nvml(
    nvml: Any = None,
    node_name: str | None = None,
    *,
    sysfs: Path = SYSFS_PCI_DEVICES,
    cpu_count: int | None = None,
) -> Inventory:
    """This machine's GPUs as one node (source "nvml"); raises DiscoveryError.

    `nvml` is a module with pynvml's API (default: import pynvml); tests pass a fake, and
    `cpu_count` (default: this machine's) for the CPU affinity masks of the machine it fakes.
    cpus and memory_bytes are left 0 here; resolve_inventory fills in the machine's.
    """
    if nvml is None:
        try:
            # import_module keeps mypy from wanting stubs pynvml does not ship.
            nvml = importlib.import_module("pynvml")
        except ImportError as e:
            raise DiscoveryError(f"pynvml is not installed ({e})") from e
    name = node_name or socket.gethostname()
    try:
        nvml.nvmlInit()
    except Exception as e:
        # Whatever stops NVML starting means "no NVML": pynvml raises NVMLError, but
        # also NVMLLibraryMismatchError and OSError from loading the library.
        raise DiscoveryError(_reason(e)) from e
    try:
        try:
            node = _read_node(nvml, name, sysfs, cpu_count or os.cpu_count() or 1)
        except nvml.NVMLError as e:  # nvmlDeviceGetCount itself
            raise DiscoveryError(_reason(e)) from e
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass  # discovery is done; a failing shutdown changes nothing we report
    return Inventory((node,), source="nvml")
