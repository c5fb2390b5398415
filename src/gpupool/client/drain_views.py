"""Drained GPUs (`gpupool drain`, `resume`, `drains`; api/drains.py, core/drain.py): the calls
are functions over a `Client`, kept out of http.py as client/steering.py's are, so commands
that never drain do not load them. Each answer is checked against its shape
(core/wire_shapes.py) and read into views in one place, as the client's are
(client/views.py): an answer of another shape is UnexpectedAnswer, never a KeyError.

Drain and resume are a pool admin's (403 otherwise); a node or GPU the pool does not have is
422 `invalid_drain`, naming what there is. Both are ApiError, as every refusal is.
"""

from __future__ import annotations

from gpupool.client.wire_json import JsonObject, JsonValue, conform, json_of
from gpupool.core.ops_shapes import DrainedWire, DrainsWire, DrainWire, ResumedWire
from gpupool.core.values import record, unlisted

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:  # pool_views reads DrainView: it need not load the HTTP client for it
    from gpupool.client.http import Client


@record
class DrainView:
    """A drained GPU: no new job starts on it until an admin resumes it."""

    node: str
    gpu: int  # its index on the node
    reason: str  # the admin's words ("" when none were given)
    by: str  # who drained it
    since: float  # when (seconds since the epoch)

    @classmethod
    def read(cls, w: DrainWire) -> DrainView:
        return cls(w["node"], w["gpu"], w["reason"], w["by"], w["since"])


@record
class DrainList:
    """GET /v1/drains, in (node, GPU) order; `wire` as received, for `drains --json`."""

    drains: tuple[DrainView, ...]
    wire: JsonObject = unlisted()


@record
class DrainReport:
    """What a drain did: the GPUs drained (as the daemon keeps them) and the jobs it requeued
    (with `now` only: they stop with their grace period and go back to the queue)."""

    drained: tuple[DrainView, ...]
    requeued: tuple[int, ...]


def read_drains(value: JsonValue) -> DrainList:
    w = conform(DrainsWire, value)
    return DrainList(tuple(DrainView.read(d) for d in w["drains"]), json_of(w))


def read_drained(value: JsonValue) -> DrainReport:
    w = conform(DrainedWire, value)
    return DrainReport(tuple(DrainView.read(d) for d in w["drained"]), tuple(w["requeued"]))


def read_resumed(value: JsonValue) -> tuple[DrainView, ...]:
    return tuple(DrainView.read(d) for d in conform(ResumedWire, value)["resumed"])


def drain_body(node: str | None, gpu: int | None, reason: str, now: bool) -> JsonObject:
    """POST /v1/drains's body. `node` None: the pool's only node; `gpu` None: every GPU of
    the node."""
    return {"node": node, "gpu": gpu, "reason": reason, "now": now}


def drains(client: Client) -> DrainList:
    """Every drained GPU of the pool (anyone may ask)."""
    return client._read(read_drains, client.request("GET", "/v1/drains", replayable=True))


def drain(
    client: Client, node: str | None, gpu: int | None, reason: str = "", now: bool = False
) -> DrainReport:
    """Drain `node`'s GPUs, or its GPU `gpu` (`drain_body` says what None means): no new
    job starts there. Jobs running there run to their end, or with `now` are requeued.
    Draining a drained GPU again keeps its first drain's time, with the new reason and
    admin."""
    answer = client.request("POST", "/v1/drains", drain_body(node, gpu, reason, now))
    return client._read(read_drained, answer)


def resume(client: Client, node: str | None, gpu: int | None) -> tuple[DrainView, ...]:
    """Let jobs start again on `node`'s GPUs (or its GPU `gpu`); the drains that were there
    (none: nothing was drained, which is not an error)."""
    body: JsonObject = {"node": node, "gpu": gpu}
    return client._read(read_resumed, client.request("POST", "/v1/drains/resume", body))
