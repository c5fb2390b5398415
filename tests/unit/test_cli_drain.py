"""Draining GPUs from the command line (cli/drain.py, client/drain_views.py): the TARGET forms
and what each sends, the answers read against their shapes (one of another shape is one line
and exit 1), what `drain`, `resume` and `drains` print, the daemon's refusals as every
command words them (exit 2), and a drained GPU in `gpupool gpus` (read from the API's own
wire)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
from fake_daemon import FakeDaemon
from fake_daemon import running as served
from policy_builders import node

from gpupool.api.wire import gpus_to_wire
from gpupool.cli.drain import (
    DRAINS_COLUMNS,
    NOTHING_DRAINED,
    NOTHING_RESUMED,
    RUN_TO_END,
    DrainTarget,
    drain_target,
    drained_lines,
    drains_rows,
    resumed_lines,
)
from gpupool.cli.gpus import job_cell
from gpupool.cli.main import _parser, main
from gpupool.cli.render import clock_time
from gpupool.client.drain_views import (
    DrainReport,
    DrainView,
    read_drained,
    read_drains,
    read_resumed,
)
from gpupool.client.pool_views import read_gpus
from gpupool.client.wire_json import JsonObject, JsonValue, WireShapeError
from gpupool.core.drain import DrainedGpu
from gpupool.core.gpu_health import HEALTH_DRAINER as HEALTH
from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobSpec, JobState, Resources
from gpupool.service.pool_stats import gpu_holders

SINCE = 1_790_000_000.0
FAN: JsonObject = {"node": "box", "gpu": 3, "reason": "fan", "by": "root", "since": SINCE}
FAN_VIEW = DrainView("box", 3, "fan", "root", SINCE)


def running(job_id: int, node_name: str, gpu: int) -> Job:
    spec = JobSpec(
        command=("python", "train.py"), workdir="/", resources=Resources(gpus=1), name="train"
    )
    return Job(
        job_id, spec, "alice", JobState.RUNNING, 0.0, start_time=1.0, node=node_name, gpus=(gpu,)
    )


# -- TARGET ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("box", DrainTarget("box", None)),
        ("box:3", DrainTarget("box", 3)),
        ("3", DrainTarget(None, 3)),  # the pool's only node: the daemon finds it
        ("gpu-node-7:0", DrainTarget("gpu-node-7", 0)),
        ("07", DrainTarget(None, 7)),
    ],
)
def test_a_target_names_a_node_a_gpu_of_it_or_a_gpu_of_the_only_node(
    text: str, target: DrainTarget
) -> None:
    assert drain_target(text) == target


@pytest.mark.parametrize("text", ["a:b:c", "box:x", "box:", ":3", "", "box:-1", "box:３", " "])
def test_a_target_of_no_known_form_is_a_usage_error_naming_the_forms(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for verb in ("drain", "resume"):
        with pytest.raises(SystemExit) as exited:
            _parser(("drain",)).parse_args([verb, "--", text])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert f"gpupool {verb}: error: argument TARGET: not a TARGET: {text!r}" in err
        assert "give NODE, NODE:GPU, or GPU (a GPU's index on the pool's only node)" in err


# -- the answers, read against their shapes -----------------------------------------------
def test_the_three_answers_read_as_views() -> None:
    listed = read_drains({"drains": [FAN]})
    assert listed.drains == (FAN_VIEW,)
    assert listed.wire == {"drains": [FAN]}  # `drains --json` prints it as it came
    assert read_drained({"drained": [FAN], "requeued": [12, 14]}) == DrainReport(
        (FAN_VIEW,), (12, 14)
    )
    assert read_resumed({"resumed": [FAN]}) == (FAN_VIEW,)
    assert read_resumed({"resumed": []}) == ()


@pytest.mark.parametrize(
    ("read", "answer", "where"),
    [
        (read_drains, {"drains": [{**FAN, "gpu": "3"}]}, r"drains\[0\]\.gpu"),
        (read_drains, {}, r"^drains: missing"),
        (read_drained, {"drained": [FAN]}, r"^requeued: missing"),
        (read_drained, {"drained": [FAN], "requeued": ["12"]}, r"requeued\[0\]"),
        (read_resumed, {"resumed": [{**FAN, "since": None}]}, r"resumed\[0\]\.since"),
        (read_resumed, [FAN], r"the answer: expected an object"),
    ],
)
def test_an_answer_of_another_shape_names_the_place(
    read: Callable[[JsonValue], object], answer: JsonValue, where: str
) -> None:
    with pytest.raises(WireShapeError, match=where):
        read(answer)


# -- what the commands print --------------------------------------------------------------
def test_drain_says_each_gpu_and_what_becomes_of_the_jobs_there() -> None:
    two = (FAN_VIEW, DrainView("box", 4, "", "root", SINCE))
    assert drained_lines(DrainReport(two, ()), now=False) == [
        "Drained node box GPU 3: fan",
        "Drained node box GPU 4",
        RUN_TO_END,
    ]
    assert drained_lines(DrainReport(two, (12, 14)), now=True)[-1] == (
        "Requeued jobs 12, 14 (they stop with their grace period)"
    )
    assert drained_lines(DrainReport(two, (12,)), now=True)[-1] == (
        "Requeued jobs 12 (they stop with their grace period)"
    )
    assert drained_lines(DrainReport(two, ()), now=True)[-1] == "No job was running there."


def test_resume_says_each_gpu_or_that_none_was_drained() -> None:
    assert resumed_lines([FAN_VIEW]) == ["Resumed node box GPU 3"]
    assert resumed_lines([]) == [NOTHING_RESUMED]


def test_the_drains_table_has_a_row_per_gpu_with_a_readable_time() -> None:
    now = time.time()
    rows = drains_rows([FAN_VIEW, DrainView("box", 4, "", "ann", now)], now)
    assert rows == [
        ("box", 3, "fan", "root", clock_time(SINCE, now)),
        ("box", 4, "-", "ann", time.strftime("%H:%M:%S", time.localtime(now))),
    ]
    assert len(DRAINS_COLUMNS) == len(rows[0])


# -- through the client, against a daemon that answers as the API does ----------------------
@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDaemon]:
    monkeypatch.setenv("GPUPOOL_TOKEN", "test-token")  # over TCP; never the user's own file
    with served(FakeDaemon()) as fake:
        yield fake


def test_drain_sends_the_target_and_prints_what_was_drained(
    daemon: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.answers[("POST", "/v1/drains")] = (200, {"drained": [FAN], "requeued": [12]})
    assert main(["--url", daemon.url, "drain", "3", "--reason", "fan", "--now"]) == 0
    assert daemon.sent == [
        ("POST", "/v1/drains", {"node": None, "gpu": 3, "reason": "fan", "now": True})
    ]
    assert capsys.readouterr().out == (
        "Drained node box GPU 3: fan\nRequeued jobs 12 (they stop with their grace period)\n"
    )
    assert main(["--url", daemon.url, "drain", "box"]) == 0
    assert daemon.sent[-1][2] == {"node": "box", "gpu": None, "reason": "", "now": False}


def test_resume_sends_the_target_and_nothing_drained_is_no_error(
    daemon: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.answers[("POST", "/v1/drains/resume")] = (200, {"resumed": []})
    assert main(["--url", daemon.url, "resume", "box:3"]) == 0
    assert daemon.sent == [("POST", "/v1/drains/resume", {"node": "box", "gpu": 3})]
    assert capsys.readouterr().out == f"{NOTHING_RESUMED}\n"


def test_drains_prints_a_table_the_wire_or_that_none_is_drained(
    daemon: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.answers[("GET", "/v1/drains")] = (200, {"drains": [FAN]})
    assert main(["--url", daemon.url, "drains"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == list(DRAINS_COLUMNS)
    assert lines[1].split()[:4] == ["box", "3", "fan", "root"]
    assert main(["--url", daemon.url, "drains", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"drains": [FAN]}
    daemon.answers[("GET", "/v1/drains")] = (200, {"drains": []})
    assert main(["--url", daemon.url, "drains"]) == 0
    assert capsys.readouterr().out == f"{NOTHING_DRAINED}\n"


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        (403, "forbidden", "only pool admins may drain or resume GPUs"),
        (422, "invalid_drain", "node box has no GPU 9 (its GPUs: 0, 1, 2, 3)"),
    ],
)
def test_a_refusal_is_the_daemons_line_and_exit_2(
    daemon: FakeDaemon,
    capsys: pytest.CaptureFixture[str],
    status: int,
    code: str,
    message: str,
) -> None:
    refusal: JsonObject = {"error": code, "message": message}
    daemon.answers[("POST", "/v1/drains")] = (status, refusal)
    daemon.answers[("POST", "/v1/drains/resume")] = (status, refusal)
    for argv in (["drain", "box:9"], ["resume", "box:9"]):
        assert main(["--url", daemon.url, *argv]) == 2
        out, err = capsys.readouterr()
        assert (out, err) == ("", f"gpupool: {message}\n")


def test_an_answer_of_another_shape_is_one_line_and_exit_1(
    daemon: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.answers[("POST", "/v1/drains")] = (200, {"drained": [FAN]})
    assert main(["--url", daemon.url, "drain", "box"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "answered in a shape this client does not know (requeued: missing)" in err


def as_sent(wire: object) -> JsonValue:
    """The API's answer as the client receives it: through JSON."""
    sent: JsonValue = json.loads(json.dumps(wire))
    return sent


# -- `gpupool gpus` ----------------------------------------------------------------------------
def test_gpus_shows_a_drained_gpu_with_its_reason_and_a_job_running_on_to_its_end() -> None:
    inventory = Inventory((node("box", 4),), "declared")
    holders = gpu_holders([running(12, "box", 0)])
    drained = {
        ("box", 0): DrainedGpu("box", 0, "new PSU", "root", SINCE),
        ("box", 1): DrainedGpu("box", 1, "fan", "root", SINCE),
        ("box", 2): DrainedGpu("box", 2, "", "root", SINCE),
        ("box", 3): DrainedGpu("box", 3, "XID 79: GPU has fallen off the bus", HEALTH, SINCE),
    }
    view = read_gpus(as_sent(gpus_to_wire(inventory, holders, drained=drained)))
    gpus = view.nodes[0].gpus
    assert gpus[1].drained == DrainView("box", 1, "fan", "root", SINCE)
    assert [job_cell(g) for g in gpus] == [
        "12 (alice: train) - draining: new PSU",
        "drained: fan",
        "drained",
        "failed: XID 79: GPU has fallen off the bus",  # drained by the pool's health watch
    ]
    assert (view.free_gpus, view.largest_startable_gpus) == (0, 0)  # drained GPUs are not free


def test_a_gpu_from_a_daemon_older_than_drains_is_not_drained() -> None:
    inventory = Inventory((node("box", 2),), "declared")
    wire = gpus_to_wire(inventory, {})
    for g in wire["nodes"][0]["gpus"]:
        del g["drained"]  # type: ignore[misc]
    assert [g.drained for g in read_gpus(as_sent(wire)).nodes[0].gpus] == [None, None]
