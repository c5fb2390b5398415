"""A GPU's health as NVML tells it (monitor/nvml_health.py reads it; docs/operations.md).

A `HealthEvent` is one thing seen on one GPU: an XID error (the driver's error report), an
uncorrectable ECC error, a row remap pending or failed, retired pages pending, the GPU fallen
off the bus (NVML answers GpuIsLost), or clock throttling for heat or power. `fault` says
whose it is: the GPU's (the pool drains the GPU and requeues what ran there), the job's (an
XID a program causes, 13/31/43: it goes into the job's history, the GPU stays in service), or
nobody's (throttling, an XID with no known meaning: shown, nothing done).

The XID meanings are NVIDIA's (the "XID Errors" table of the GPU deployment guide); only the
codes a pool acts on are named here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

HEALTH_DRAINER = "gpupool-health"  # who a drain made for a GPU fault is by


class Fault(StrEnum):
    GPU = "gpu"  # the GPU's: drained, its jobs requeued
    JOB = "job"  # the job's own doing: its history, the GPU stays
    NONE = "none"  # shown only


class HealthKind(StrEnum):
    XID = "xid"
    ECC_UNCORRECTED = "ecc_uncorrected"  # the volatile uncorrectable count went up
    ROW_REMAP_PENDING = "row_remap_pending"  # a remap waits for a GPU reset
    ROW_REMAP_FAILED = "row_remap_failed"  # a row could not be remapped
    RETIRED_PAGES_PENDING = "retired_pages_pending"  # pages wait for a reset to retire
    LOST = "lost"  # fallen off the bus: NVML answers GpuIsLost
    THROTTLE = "throttle"  # clocks slowed for heat or power (hardware slowdown)


# XID -> (meaning, whose fault). The job's: a program's illegal access or exception.
XIDS: dict[int, tuple[str, Fault]] = {
    13: ("graphics engine exception", Fault.JOB),
    31: ("GPU memory page fault", Fault.JOB),
    43: ("GPU stopped processing", Fault.JOB),
    48: ("double-bit ECC error", Fault.GPU),
    63: ("ECC page retirement or row remapping recorded", Fault.GPU),
    64: ("ECC page retirement or row remapping failed", Fault.GPU),
    74: ("NVLink error", Fault.GPU),
    79: ("GPU has fallen off the bus", Fault.GPU),
    94: ("contained ECC error", Fault.GPU),
    95: ("uncontained ECC error", Fault.GPU),
}

_KIND_FAULT = {
    HealthKind.ECC_UNCORRECTED: Fault.GPU,
    HealthKind.ROW_REMAP_PENDING: Fault.GPU,
    HealthKind.ROW_REMAP_FAILED: Fault.GPU,
    HealthKind.RETIRED_PAGES_PENDING: Fault.GPU,
    HealthKind.LOST: Fault.GPU,
    HealthKind.THROTTLE: Fault.NONE,
}


@dataclass(frozen=True, slots=True)
class HealthEvent:
    node: str
    gpu: int
    time: float
    kind: HealthKind
    code: int | None  # the XID; None for the other kinds
    detail: str  # in words: "XID 79: GPU has fallen off the bus"
    fault: Fault

    @property
    def key(self) -> tuple[str, int]:
        return (self.node, self.gpu)


def xid_event(node: str, gpu: int, time: float, xid: int) -> HealthEvent:
    meaning, fault = XIDS.get(xid, ("no meaning known to gpupool", Fault.NONE))
    return HealthEvent(node, gpu, time, HealthKind.XID, xid, f"XID {xid}: {meaning}", fault)


def health_event(node: str, gpu: int, time: float, kind: HealthKind, detail: str) -> HealthEvent:
    """An event of a kind other than XID, its fault from the kind."""
    return HealthEvent(node, gpu, time, kind, None, detail, _KIND_FAULT[kind])
