"""GPU health from the command line (cli/health.py, client/health_views.py, api/health.py):
the service's records as the API sends them and the client reads them, an answer of another
shape (one line and exit 1), and what `gpupool health` prints: a row per GPU, the events
newest first with --events, the wire with --json, and the footer for failed GPUs."""

from __future__ import annotations

import json
import re
import time

import pytest
from fake_daemon import FakeDaemon
from test_cli_drain import as_sent, daemon  # noqa: F401  (the fixture)

from gpupool.api.health import health_to_wire
from gpupool.cli.health import (
    EVENTS_COLUMNS,
    FAILED_FOOTER,
    HEALTH_COLUMNS,
    NO_EVENTS,
    NO_GPUS,
    events_rows,
    health_rows,
    newest_first,
)
from gpupool.cli.main import main
from gpupool.cli.render import clock_time
from gpupool.client.drain_views import DrainView
from gpupool.client.health_views import GpuHealthView, HealthEventView, read_health
from gpupool.client.wire_json import JsonObject, JsonValue, WireShapeError
from gpupool.core.drain import DrainedGpu
from gpupool.core.gpu_health import HEALTH_DRAINER, HealthKind, health_event, xid_event
from gpupool.service.gpu_health import GpuHealth, HealthState

T = 1_790_000_000.0
LOST = xid_event("box", 3, T, 79)
SLOW = health_event("box", 1, T + 5, HealthKind.THROTTLE, "clocks slowed: thermal")
JOBS = xid_event("box", 1, T - 5, 13)
FAILED_DRAIN = DrainedGpu("box", 3, LOST.detail, HEALTH_DRAINER, T + 1)
GPUS = [
    GpuHealth("box", 0, HealthState.OK, None, ()),
    GpuHealth("box", 1, HealthState.DEGRADED, None, (SLOW, JOBS)),
    GpuHealth("box", 3, HealthState.FAILED, FAILED_DRAIN, (LOST,)),
]
LOST_VIEW = HealthEventView("box", 3, T, "xid", 79, "XID 79: GPU has fallen off the bus", "gpu")
SLOW_VIEW = HealthEventView("box", 1, T + 5, "throttle", None, "clocks slowed: thermal", "none")
JOBS_VIEW = HealthEventView("box", 1, T - 5, "xid", 13, "XID 13: graphics engine exception", "job")
FAILED_VIEW = DrainView("box", 3, LOST.detail, HEALTH_DRAINER, T + 1)


def wire() -> JsonValue:
    return as_sent(health_to_wire(GPUS))


# -- the answer, read against its shape ----------------------------------------------------
def test_the_api_s_answer_reads_as_views() -> None:
    found = read_health(wire())
    assert found.gpus == (
        GpuHealthView("box", 0, "ok", None, ()),
        GpuHealthView("box", 1, "degraded", None, (SLOW_VIEW, JOBS_VIEW)),
        GpuHealthView("box", 3, "failed", FAILED_VIEW, (LOST_VIEW,)),
    )
    assert found.wire == wire()  # `health --json` prints it as it came


def _gpu(**changed: JsonValue) -> JsonObject:
    g = json.loads(json.dumps(health_to_wire(GPUS)["gpus"][2]))
    assert isinstance(g, dict)
    return {**g, **changed}


LOST_WIRE: JsonObject = {
    "node": "box",
    "gpu": 3,
    "time": T,
    "kind": "xid",
    "code": 79,
    "detail": "XID 79: GPU has fallen off the bus",
    "fault": "gpu",
}


@pytest.mark.parametrize(
    ("answer", "where"),
    [
        ({}, r"^gpus: missing"),
        ({"gpus": [_gpu(state=None)]}, r"gpus\[0\]\.state"),
        ({"gpus": [_gpu(drained={"node": "box"})]}, r"gpus\[0\]\.drained"),
        ({"gpus": [_gpu(events=[{**LOST_WIRE, "code": "79"}])]}, r"events\[0\]\.code"),
        ({"gpus": [_gpu(events=[{**LOST_WIRE, "time": None}])]}, r"events\[0\]\.time"),
        ([], r"the answer: expected an object"),
    ],
)
def test_an_answer_of_another_shape_names_the_place(answer: JsonValue, where: str) -> None:
    with pytest.raises(WireShapeError, match=where):
        read_health(answer)


def test_an_event_as_sent_is_the_wire_the_shape_names() -> None:
    sent = as_sent(health_to_wire(GPUS))
    assert isinstance(sent, dict) and isinstance(sent["gpus"], list)
    assert sent["gpus"][2] == {
        "node": "box",
        "gpu": 3,
        "state": "failed",
        "drained": {
            "node": "box",
            "gpu": 3,
            "reason": LOST.detail,
            "by": HEALTH_DRAINER,
            "since": T + 1,
        },
        "events": [LOST_WIRE],
    }


# -- the rows -------------------------------------------------------------------------------
def test_a_row_per_gpu_with_its_state_and_last_event() -> None:
    gpus = read_health(wire()).gpus
    now = time.time()
    assert health_rows(gpus, now) == [
        ("box", 0, "ok", "-"),
        ("box", 1, "degraded", f"clocks slowed: thermal ({clock_time(T + 5, now)})"),
        ("box", 3, "failed", f"XID 79: GPU has fallen off the bus ({clock_time(T, now)})"),
    ]
    assert len(HEALTH_COLUMNS) == len(health_rows(gpus)[0])


def test_the_events_of_every_gpu_newest_first() -> None:
    events = newest_first(read_health(wire()).gpus)
    assert events == [SLOW_VIEW, LOST_VIEW, JOBS_VIEW]
    rows = events_rows(events, T)
    assert rows[0] == (clock_time(T + 5, T), "box", 1, "none", "clocks slowed: thermal")
    assert rows[2][3:] == ("job", "XID 13: graphics engine exception")
    assert len(EVENTS_COLUMNS) == len(rows[0])


# -- through the client, against a daemon that answers as the API does ----------------------
def test_health_prints_a_row_per_gpu_and_the_footer_for_failed_ones(
    daemon: FakeDaemon,  # noqa: F811  (the fixture)
    capsys: pytest.CaptureFixture[str],
) -> None:
    daemon.answers[("GET", "/v1/health")] = (200, wire())
    assert main(["--url", daemon.url, "health"]) == 0
    assert daemon.sent == [("GET", "/v1/health", None)]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NODE", "GPU", "STATE", "LAST", "EVENT"]
    assert [line.split()[:3] for line in lines[1:4]] == [
        ["box", "0", "ok"],
        ["box", "1", "degraded"],
        ["box", "3", "failed"],
    ]
    assert "XID 79: GPU has fallen off the bus (" in lines[3]
    assert lines[4:] == [FAILED_FOOTER]


def test_health_events_lists_the_history_newest_first(
    daemon: FakeDaemon,  # noqa: F811  (the fixture)
    capsys: pytest.CaptureFixture[str],
) -> None:
    daemon.answers[("GET", "/v1/health")] = (200, wire())
    assert main(["--url", daemon.url, "health", "--events"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == list(EVENTS_COLUMNS)
    cells = [re.split(r"\s{2,}", line) for line in lines[1:4]]  # a TIME has one space
    assert [c[0] for c in cells] == [clock_time(t) for t in (T + 5, T, T - 5)]
    assert [c[1:] for c in cells] == [
        ["box", "1", "none", "clocks slowed: thermal"],
        ["box", "3", "gpu", "XID 79: GPU has fallen off the bus"],
        ["box", "1", "job", "XID 13: graphics engine exception"],
    ]
    assert lines[4:] == [FAILED_FOOTER]


def test_health_json_no_events_no_gpus_and_no_footer_without_a_failed_gpu(
    daemon: FakeDaemon,  # noqa: F811  (the fixture)
    capsys: pytest.CaptureFixture[str],
) -> None:
    daemon.answers[("GET", "/v1/health")] = (200, wire())
    assert main(["--url", daemon.url, "health", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == wire()
    calm = as_sent(health_to_wire(GPUS[:1]))
    daemon.answers[("GET", "/v1/health")] = (200, calm)
    assert main(["--url", daemon.url, "health", "--events"]) == 0
    assert capsys.readouterr().out == f"{NO_EVENTS}\n"
    assert main(["--url", daemon.url, "health"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["box", "0", "ok", "-"]
    daemon.answers[("GET", "/v1/health")] = (200, {"gpus": []})
    assert main(["--url", daemon.url, "health"]) == 0
    assert capsys.readouterr().out == f"{NO_GPUS}\n"


def test_an_answer_of_another_shape_is_one_line_and_exit_1(
    daemon: FakeDaemon,  # noqa: F811  (the fixture)
    capsys: pytest.CaptureFixture[str],
) -> None:
    daemon.answers[("GET", "/v1/health")] = (200, {"gpus": [_gpu(state=3)]})
    assert main(["--url", daemon.url, "health"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "answered in a shape this client does not know (gpus[0].state" in err
