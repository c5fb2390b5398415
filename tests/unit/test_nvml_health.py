"""monitor/nvml_health.py against the fake NVML: XIDs from the event set with their meaning
and whose fault, ECC counts going up, row remaps and retired pages as they come on (once),
throttling, a GPU fallen off the bus (once, then not asked), and functions a driver lacks."""

from __future__ import annotations

from fixtures.fake_nvml import FakeGpu, FakeNvml
from gpupool.core.gpu_health import Fault, HealthKind
from gpupool.monitor.nvml_health import NvmlHealth


def _reader(*gpus: FakeGpu, **kw: object) -> tuple[FakeNvml, NvmlHealth]:
    nvml = FakeNvml(list(gpus), **kw)  # type: ignore[arg-type]
    nvml.nvmlInit()
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(len(gpus))]
    return nvml, NvmlHealth("box", nvml, handles)


def test_xids_come_with_their_meaning_and_whose_fault() -> None:
    nvml, health = _reader(FakeGpu(), FakeGpu())
    assert health.read(1.0) == []
    nvml.gpus[1].xids += [79, 13, 999]
    found = health.read(2.0)
    assert [(e.gpu, e.kind, e.code, e.fault) for e in found] == [
        (1, HealthKind.XID, 79, Fault.GPU),
        (1, HealthKind.XID, 13, Fault.JOB),
        (1, HealthKind.XID, 999, Fault.NONE),
    ]
    assert found[0].detail == "XID 79: GPU has fallen off the bus"
    assert health.read(3.0) == []  # each is read once


def test_ecc_remaps_and_retired_pages_are_told_as_they_come_on() -> None:
    nvml, health = _reader(FakeGpu(ecc_uncorrected=2))
    first = health.read(1.0)  # errors already counted at start are told
    assert [(e.kind, e.fault) for e in first] == [(HealthKind.ECC_UNCORRECTED, Fault.GPU)]
    assert health.read(2.0) == []
    nvml.gpus[0].ecc_uncorrected = 3
    nvml.gpus[0].remapped_rows = (0, 1, True, False)
    kinds = [e.kind for e in health.read(3.0)]
    assert kinds == [HealthKind.ECC_UNCORRECTED, HealthKind.ROW_REMAP_PENDING]
    assert health.read(4.0) == []  # still pending: not told again
    nvml.gpus[0].remapped_rows = (0, 1, False, True)
    assert [e.kind for e in health.read(5.0)] == [HealthKind.ROW_REMAP_FAILED]


def test_retired_pages_where_a_gpu_has_no_row_remapping() -> None:
    nvml, health = _reader(FakeGpu(), unsupported={"nvmlDeviceGetRemappedRows"})
    assert health.read(1.0) == []
    nvml.gpus[0].retired_pages_pending = True
    assert [e.kind for e in health.read(2.0)] == [HealthKind.RETIRED_PAGES_PENDING]
    calls = nvml.calls.count("nvmlDeviceGetRemappedRows")
    health.read(3.0)
    assert nvml.calls.count("nvmlDeviceGetRemappedRows") == calls  # not asked again


def test_throttling_is_nobody_s_fault_and_told_when_it_starts() -> None:
    nvml, health = _reader(FakeGpu())
    nvml.gpus[0].throttle_reasons = 0x40 | 0x80
    (event,) = health.read(1.0)
    assert (event.kind, event.fault) == (HealthKind.THROTTLE, Fault.NONE)
    assert "thermal slowdown (hardware)" in event.detail and "power brake" in event.detail
    assert health.read(2.0) == []
    nvml.gpus[0].throttle_reasons = 0
    assert health.read(3.0) == []
    nvml.gpus[0].throttle_reasons = 0x08
    assert [e.kind for e in health.read(4.0)] == [HealthKind.THROTTLE]


def test_a_gpu_fallen_off_the_bus_is_told_once_and_not_asked_again() -> None:
    nvml, health = _reader(FakeGpu(), FakeGpu())
    nvml.gpus[0].lost = True
    found = health.read(1.0)
    assert [(e.gpu, e.kind, e.fault) for e in found] == [(0, HealthKind.LOST, Fault.GPU)]
    before = len(nvml.calls)
    assert health.read(2.0) == []
    asked = nvml.calls[before:]
    assert asked.count("nvmlDeviceGetTotalEccErrors") == 1  # GPU 1's only


def test_a_driver_without_events_or_counters_reads_nothing_and_does_not_fail() -> None:
    names = {
        "nvmlEventSetCreate",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    }
    nvml, health = _reader(FakeGpu(ecc_uncorrected=5), hidden=names)
    assert health.read(1.0) == []
    health.close()
