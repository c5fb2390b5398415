"""A node's GPU health from NVML, read once per monitor round (core/gpu_health.py says what
an event is and whose fault it is; daemon/health_watch.py acts on them).

- **XID errors**: an NVML event set with `nvmlEventTypeXidCriticalError` registered on each
  GPU at start, drained without waiting each round (NVML queues the events in between).
- **Uncorrectable ECC errors**: the volatile count (since the driver loaded); an event when it
  is above 0 at the first read and each time it goes up.
- **Row remapping** (A100 and later): an event when a remap becomes pending or has failed;
  **retired pages pending** (older GPUs), the same.
- **Fallen off the bus**: a call answering GpuIsLost: one event, then nothing more is asked
  of that GPU.
- **Throttling** for heat or power (hardware slowdown, thermal, power brake): an event when
  it starts, nobody's fault (shown only).

A condition reported is not reported again while it lasts. A function this driver or pynvml
lacks, or that a GPU does not support, is left out from then on. Reading health never fails
a round: an unexpected NVML error leaves that check out of this round.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpupool.core.gpu_health import HealthEvent, HealthKind, health_event, xid_event

_EVENTS_PER_ROUND = 256  # XIDs read per round at most: a storm must not hold the monitor
_THROTTLE_BITS = (
    ("nvmlClocksThrottleReasonHwSlowdown", 0x08, "hardware slowdown"),
    ("nvmlClocksThrottleReasonSwThermalSlowdown", 0x20, "thermal slowdown (software)"),
    ("nvmlClocksThrottleReasonHwThermalSlowdown", 0x40, "thermal slowdown (hardware)"),
    ("nvmlClocksThrottleReasonHwPowerBrakeSlowdown", 0x80, "power brake slowdown"),
)


class NvmlHealth:
    def __init__(self, node: str, nvml: Any, handles: Sequence[Any]) -> None:
        """`nvml`: the pynvml module (initialized), `handles`: the node's GPUs by index."""
        self.node = node
        self._nvml = nvml
        self._handles = list(handles)
        self._skip: set[str] = set()  # functions not there or not supported
        self._lost: set[int] = set()
        self._ecc: dict[int, int] = {}
        self._on: set[tuple[int, HealthKind]] = set()  # conditions reported, still on
        self._events = self._event_set()

    def _event_set(self) -> Any:
        nvml, kind = self._nvml, getattr(self._nvml, "nvmlEventTypeXidCriticalError", 0x8)
        try:
            events = nvml.nvmlEventSetCreate()
        except (AttributeError, nvml.NVMLError):
            return None
        for handle in self._handles:
            try:
                nvml.nvmlDeviceRegisterEvents(handle, kind, events)
            except nvml.NVMLError:
                continue  # this GPU reports no XID events (NotSupported)
        return events

    def close(self) -> None:
        if self._events is not None:
            try:
                self._nvml.nvmlEventSetFree(self._events)
            except (AttributeError, self._nvml.NVMLError):
                pass

    def read(self, now: float) -> list[HealthEvent]:
        """What is new since the last read, on every GPU."""
        found = self._xids(now)
        for index, handle in enumerate(self._handles):
            if index not in self._lost:
                found += self._gpu(index, handle, now)
        return found

    def _xids(self, now: float) -> list[HealthEvent]:
        nvml = self._nvml
        out: list[HealthEvent] = []
        if self._events is None:
            return out
        for _ in range(_EVENTS_PER_ROUND):
            try:
                event = nvml.nvmlEventSetWait(self._events, 0)
            except nvml.NVMLError:
                break  # Timeout: nothing (more) queued
            index = self._index_of(event.device)
            if index is not None:
                out.append(xid_event(self.node, index, now, int(event.eventData)))
        return out

    def _index_of(self, device: Any) -> int | None:
        try:
            return int(self._nvml.nvmlDeviceGetIndex(device))
        except (AttributeError, self._nvml.NVMLError):
            return next((i for i, h in enumerate(self._handles) if h == device), None)

    def _gpu(self, index: int, handle: Any, now: float) -> list[HealthEvent]:
        out: list[HealthEvent] = []
        try:
            self._ecc_read(index, handle, now, out)
            self._remap_read(index, handle, now, out)
            self._throttle_read(index, handle, now, out)
        except self._nvml.NVMLError_GpuIsLost:
            self._lost.add(index)
            detail = "the GPU has fallen off the bus (NVML: GPU is lost)"
            out.append(health_event(self.node, index, now, HealthKind.LOST, detail))
        return out

    def _call(self, name: str, *args: Any) -> Any:
        """NVML's `name(*args)`, or None when it is not there or not supported (then never
        asked again); GpuIsLost goes up to `_gpu`."""
        if name in self._skip:
            return None
        nvml = self._nvml
        try:
            return getattr(nvml, name)(*args)
        except nvml.NVMLError_GpuIsLost:
            raise
        except (AttributeError, nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound):
            self._skip.add(name)
            return None
        except nvml.NVMLError:
            return None

    def _ecc_read(self, index: int, handle: Any, now: float, out: list[HealthEvent]) -> None:
        nvml = self._nvml
        kind = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        counter = getattr(nvml, "NVML_VOLATILE_ECC", 0)
        count = self._call("nvmlDeviceGetTotalEccErrors", handle, kind, counter)
        if count is None:
            return
        before = self._ecc.get(index, 0)
        self._ecc[index] = int(count)
        if count > before:
            detail = (
                f"{count - before} uncorrectable ECC error(s) ({count} since the driver loaded)"
            )
            out.append(health_event(self.node, index, now, HealthKind.ECC_UNCORRECTED, detail))

    def _remap_read(self, index: int, handle: Any, now: float, out: list[HealthEvent]) -> None:
        rows = self._call("nvmlDeviceGetRemappedRows", handle)
        if rows is not None:
            _corrected, uncorrected, pending, failed = rows
            self._edge(index, HealthKind.ROW_REMAP_PENDING, bool(pending), now, out,
                       f"a row remap is pending ({uncorrected} rows remapped for "
                       "uncorrectable errors): the GPU needs a reset")  # fmt: skip
            self._edge(index, HealthKind.ROW_REMAP_FAILED, bool(failed), now, out,
                       "a row could not be remapped: the GPU needs service")  # fmt: skip
            return
        pending = self._call("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        if pending is not None:
            on = pending == getattr(self._nvml, "NVML_FEATURE_ENABLED", 1)
            self._edge(index, HealthKind.RETIRED_PAGES_PENDING, on, now, out,
                       "retired pages are pending: the GPU needs a reset")  # fmt: skip

    def _throttle_read(self, index: int, handle: Any, now: float, out: list[HealthEvent]) -> None:
        reasons = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        if reasons is None:
            return
        nvml = self._nvml
        why = [text for name, bit, text in _THROTTLE_BITS if reasons & getattr(nvml, name, bit)]
        detail = "clocks throttled: " + ", ".join(why)
        self._edge(index, HealthKind.THROTTLE, bool(why), now, out, detail)

    def _edge(
        self,
        index: int,
        kind: HealthKind,
        on: bool,
        now: float,
        out: list[HealthEvent],
        detail: str,
    ) -> None:
        """An event when the condition `kind` comes on; none while it stays on."""
        key = (index, kind)
        if on and key not in self._on:
            self._on.add(key)
            out.append(health_event(self.node, index, now, kind, detail))
        elif not on:
            self._on.discard(key)
