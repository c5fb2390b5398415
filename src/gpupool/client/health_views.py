"""GPU health (`gpupool health`; api/health.py, core/gpu_health.py): the call is a function
over a `Client`, kept out of http.py as client/drain_views.py's are, so commands that never
ask about health do not load it. The answer is checked against its shape
(core/wire_shapes.py) and read into views in one place (client/views.py): an answer of
another shape is UnexpectedAnswer, never a KeyError.
"""

from __future__ import annotations

from gpupool.client.drain_views import DrainView
from gpupool.client.wire_json import JsonObject, JsonValue, conform, json_of
from gpupool.core.ops_shapes import GpuHealthWire, HealthEventWire, HealthWire
from gpupool.core.values import record, unlisted

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.client.http import Client

FAILED = "failed"  # a GPU drained by gpupool-health for a GPU fault


@record
class HealthEventView:
    """One thing NVML reported on a GPU: `kind` ("xid", "lost", "throttle", ...), `code` the
    XID (None for other kinds), `detail` in words, `fault` "gpu", "job" or "none"."""

    node: str
    gpu: int
    time: float
    kind: str
    code: int | None
    detail: str
    fault: str

    @classmethod
    def read(cls, w: HealthEventWire) -> HealthEventView:
        return cls(w["node"], w["gpu"], w["time"], w["kind"], w["code"], w["detail"], w["fault"])


@record
class GpuHealthView:
    """A GPU's state ("ok", "degraded", "drained", "failed"), its drain, and its last
    events, newest first."""

    node: str
    gpu: int
    state: str
    drained: DrainView | None
    events: tuple[HealthEventView, ...]

    @classmethod
    def read(cls, w: GpuHealthWire) -> GpuHealthView:
        d = w["drained"]
        return cls(
            w["node"],
            w["gpu"],
            w["state"],
            None if d is None else DrainView.read(d),
            tuple(HealthEventView.read(e) for e in w["events"]),
        )


@record
class HealthList:
    """GET /v1/health, in (node, GPU) order; `wire` as received, for `health --json`."""

    gpus: tuple[GpuHealthView, ...]
    wire: JsonObject = unlisted()


def read_health(value: JsonValue) -> HealthList:
    w = conform(HealthWire, value)
    return HealthList(tuple(GpuHealthView.read(g) for g in w["gpus"]), json_of(w))


def health(client: Client) -> HealthList:
    """Each GPU's health (anyone may ask)."""
    return client._read(read_health, client.request("GET", "/v1/health", replayable=True))
