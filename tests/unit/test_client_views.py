"""client/views.py: the API's JSON read into typed views in one place, a shape the client does
not know named where it is wrong, and the CLI's one line (exit 1) for such an answer."""

from __future__ import annotations

import copy
import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from gpupool.api.wire import job_to_wire
from gpupool.cli.main import main
from gpupool.client import JsonObject, WaitCode, WireShapeError
from gpupool.client.views import read_job, read_job_page
from gpupool.core.job import Job, JobSpec, JobState, Resources, Transition
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.snapshot import PriorityFactors, Reservation
from gpupool.policy.status import Code, Rule, Status
from gpupool.service.pool_service import Explanation


def test_wait_codes_mirror_the_policy_codes() -> None:
    assert {c.value for c in WaitCode} == {c.value for c in Code}


def _pending_job() -> Job:
    spec = JobSpec(
        command=("python", "train.py"),
        resources=Resources(gpus=4, gpu_type="A100"),
        name="train",
        env=(("A", "1"),),
        time_limit_s=3600.0,
        workdir="/work",
    )
    history = (Transition(100.0, None, JobState.PENDING, "submitted"),)
    return Job(7, spec, "alice", JobState.PENDING, 100.0, reason="Resources", events=history)


def _wire() -> JsonObject:
    status = Status(
        Code.RESOURCES,
        Rule.NO_FIT,
        short=Insufficient("box", Dimension.GPU_COUNT, 4, 1, 8),
    )
    explain = Explanation(
        status=status,
        estimated_start=700.0,
        reservation=Reservation(7, "box", (0, 1, 2, 3), 700.0),
        priority_factors=PriorityFactors(7, 200, 0.5, 0.1, 0.2, 9.5),
    )
    wire: JsonObject = json.loads(json.dumps(job_to_wire(_pending_job(), explain, "/log")))
    return wire


def test_a_job_reads_as_the_daemon_wrote_it() -> None:
    job = read_job(_wire())
    assert (job.id, job.name, job.user, job.state) == (7, "train", "alice", JobState.PENDING)
    assert job.command == ("python", "train.py") and job.env == {"A": "1"}
    assert (job.resources.gpus, job.resources.gpu_type) == (4, "A100")
    assert job.wait is not None and job.wait.code is WaitCode.RESOURCES
    assert (job.wait.dimension, job.wait.requested, job.wait.free, job.wait.capacity) == (
        "gpu_count",
        4,
        1,
        8,
    )
    assert job.wait_code is WaitCode.RESOURCES
    assert job.reservation is not None and job.reservation.gpus == (0, 1, 2, 3)
    assert job.priority_factors is not None and job.priority_factors.klass == 200
    assert [(e.frm, e.to, e.cause) for e in job.events] == [(None, JobState.PENDING, "submitted")]
    assert job.wire == _wire()  # kept as received, for --json


def test_numbers_keep_their_kind() -> None:
    """4 stays 4 and 4.0 stays 4.0: what `--json` prints from a view is what came."""
    wire = _wire()
    wire["time_limit_s"] = 3600
    job = read_job(wire)
    assert type(job.time_limit_s) is int and type(job.grace_s) is float


@pytest.mark.parametrize(
    ("path", "value", "where", "problem"),
    [
        (("state",), "SLEEPING", "state", "not a job state: 'SLEEPING'"),
        (("resources", "gpus"), "two", "resources.gpus", "expected a whole number, got 'two'"),
        (("wait", "code"), "Busy", "wait.code", "not a wait code: 'Busy'"),
        (("gpus",), [0, "1"], "gpus[1]", "expected a whole number, got '1'"),
        (("cancel_requested",), 1, "cancel_requested", "expected true or false, got the number 1"),
        (("command",), None, "command", "expected a list, got null"),
    ],
)
def test_a_value_of_another_shape_is_named(
    path: tuple[str, ...], value: object, where: str, problem: str
) -> None:
    wire = copy.deepcopy(_wire())
    inner = wire
    for key in path[:-1]:
        inner = inner[key]  # type: ignore[assignment]
    inner[path[-1]] = value  # type: ignore[assignment]
    with pytest.raises(WireShapeError) as caught:
        read_job(wire)
    assert (caught.value.where, caught.value.problem) == (where, problem)


def test_a_missing_field_is_named_with_its_place_in_the_page() -> None:
    wire = _wire()
    del wire["user"]
    page = {
        "jobs": [_wire(), wire],
        "total": 2,
        "counts": {"PENDING": 2},
        "offset": 0,
        "limit": None,
    }
    with pytest.raises(WireShapeError, match=r"^jobs\[1\]\.user: missing$"):
        read_job_page(page)


@pytest.fixture
def odd_daemon() -> Iterator[str]:
    """A server that speaks the API's HTTP (its header) but answers a job without a state."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            wire = _wire()
            del wire["state"]
            body = json.dumps(wire).encode()
            self.send_response(200)
            self.send_header("x-gpupool-version", "99.0")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_answer_of_an_unknown_shape_is_one_line_and_exit_1(
    odd_daemon: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--url", odd_daemon, "show", "7"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"gpupool: the daemon at {odd_daemon} answered in a shape this client does not know "
        "(state: missing): is it another version of gpupool?\n"
    )
