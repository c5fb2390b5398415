"""The Kubernetes backend's client code (backends/kubernetes/backend.py) against a recorded
API server (tests/kubernetes_api.py): the real `kubernetes` client over real HTTP, answers
recorded from the API's documented shapes (tests/fixtures/kubernetes/), every request the
client sends asserted: method, path, label selector, body."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient
from kubernetes_api import (
    FIXTURES,
    RecordedApiServer,
    Reply,
    fixture,
    recorded_api_server,
    write_kubeconfig,
)
from test_kubernetes_render import request as launch_request

from gpupool.backends.kubernetes import open_backend
from gpupool.backends.kubernetes.render import render_job, service_manifest
from gpupool.backends.kubernetes.settings import parse_settings
from gpupool.core.backends import Backend, BackendContext
from gpupool.core.execution import ExitReason, Handle, RunState, StopKind

JOBS = "/apis/batch/v1/namespaces/ml/jobs"
PODS = "/api/v1/namespaces/ml/pods"
SERVICES = "/api/v1/namespaces/ml/services"
TABLE: dict[str, object] = {
    "namespace": "ml",
    "default_image": "python:3.12-slim",
    "queues": {"vision": "vision"},
    "request_timeout_s": 2,
}


@pytest.fixture
def api() -> Iterator[RecordedApiServer]:
    with recorded_api_server() as server:
        yield server


def backend_for(url: str, tmp_path: Path, **extra: object) -> Backend:
    config = write_kubeconfig(tmp_path / "kubeconfig", url)
    table = {**TABLE, "kubeconfig": str(config), **extra}
    return open_backend("k8s", table, BackendContext("p1", tmp_path / "state"))


@pytest.fixture
def backend(api: RecordedApiServer, tmp_path: Path) -> Iterator[Backend]:
    opened = backend_for(api.url, tmp_path)
    yield opened
    opened.close()


def _normal(value: object, key: str = "") -> object:
    """A fixture as the client writes it back: its times (fields `...Time`, `...Timestamp`,
    `...At`, the model's datetimes) with `+00:00` for `Z`, no nulls."""
    if isinstance(value, dict):
        return {k: _normal(v, k) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, str) and key.endswith(("Time", "Timestamp", "At")):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", value), value
        return value[:-1] + "+00:00"
    return value


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("job_list.json", "V1JobList"),
        ("job_created.json", "V1Job"),
        ("job_running.json", "V1Job"),
        ("job_complete.json", "V1Job"),
        ("job_deleting.json", "V1Job"),
        ("pod_list_failed.json", "V1PodList"),
        ("pod_list_running.json", "V1PodList"),
        ("status_already_exists.json", "V1Status"),
        ("status_service_exists.json", "V1Status"),
        ("status_forbidden.json", "V1Status"),
        ("status_job_not_found.json", "V1Status"),
        ("version.json", "VersionInfo"),
    ],
)
def test_every_fixture_is_what_the_api_sends(name: str, model: str) -> None:
    """Each recorded answer reads into the client's model and back with nothing lost."""
    client = ApiClient()
    text = (FIXTURES / name).read_text()
    back = client.sanitize_for_serialization(client.deserialize(text, model, "application/json"))
    assert back == _normal(json.loads(text))


def test_launch_creates_the_rendered_job(api: RecordedApiServer, backend: Backend) -> None:
    api.answer("POST", JOBS, Reply.fixture(201, "job_created.json"))
    req = launch_request()
    backend.launch(req)
    (seen,) = api.requests()
    assert (seen.method, seen.path) == ("POST", JOBS)
    settings = parse_settings(TABLE)
    assert seen.body == render_job(req, settings, "p1").job  # the manifest, nothing lost


def test_a_gang_gets_its_headless_service_owned_by_the_job(
    api: RecordedApiServer, backend: Backend
) -> None:
    api.answer("POST", JOBS, Reply.fixture(201, "job_created.json"))
    api.answer("POST", SERVICES, Reply(201, b"{}"))
    req = launch_request(nodes=2, torchrun=True)
    backend.launch(req)
    job_post, service_post = api.requests()
    assert (job_post.method, job_post.path, service_post.method, service_post.path) == (
        "POST",
        JOBS,
        "POST",
        SERVICES,
    )
    run = render_job(req, parse_settings(TABLE), "p1")
    created = fixture("job_created.json")
    assert isinstance(created, dict) and isinstance(created["metadata"], dict)
    uid = created["metadata"]["uid"]
    assert isinstance(uid, str)
    assert service_post.body == service_manifest(run, uid)


def test_a_repeated_launch_is_idempotent(api: RecordedApiServer, backend: Backend) -> None:
    """409 AlreadyExists: the run exists; the gang's Service is made if missing, once."""
    api.answer("POST", JOBS, Reply.fixture(409, "status_already_exists.json"))
    api.answer("GET", f"{JOBS}/gp-p1-7-1", Reply.fixture(200, "job_created.json"))
    api.answer("POST", SERVICES, Reply.fixture(409, "status_service_exists.json"))
    backend.launch(launch_request(nodes=2, torchrun=True))
    assert [(s.method, s.path) for s in api.requests()] == [
        ("POST", JOBS),
        ("GET", f"{JOBS}/gp-p1-7-1"),
        ("POST", SERVICES),
    ]
    api.clear()
    api.answer("GET", JOBS, Reply.fixture(200, "job_list.json"))
    (obs,) = backend.poll([Handle(7, 1)]).values()
    assert obs.state is RunState.UNLAUNCHED  # not in this recorded list: never a failure


def test_a_refused_job_fails_with_the_api_servers_words(
    api: RecordedApiServer, backend: Backend
) -> None:
    api.answer("POST", JOBS, Reply.fixture(403, "status_forbidden.json"))
    backend.launch(launch_request())
    obs = backend.poll([Handle(7, 1)])[Handle(7, 1)]
    assert obs.state is RunState.EXITED and obs.exit is not None
    assert obs.exit.reason is ExitReason.SPAWN_FAILED
    assert 'cannot create resource "jobs"' in obs.exit.message
    assert len(api.requests()) == 1  # the refused run is known here: no list call for it


def test_no_image_is_refused_without_a_call(api: RecordedApiServer, tmp_path: Path) -> None:
    bare = backend_for(api.url, tmp_path, default_image=None)
    bare.launch(launch_request())
    obs = bare.poll([Handle(7, 1)])[Handle(7, 1)]
    assert obs.exit is not None and obs.exit.reason is ExitReason.SPAWN_FAILED
    assert "default_image" in obs.exit.message
    assert api.requests() == []


def test_one_poll_is_one_job_list_and_maps_every_state(
    api: RecordedApiServer, backend: Backend
) -> None:
    api.answer("GET", JOBS, Reply.fixture(200, "job_list.json"))
    api.answer("GET", PODS, Reply.fixture(200, "pod_list_failed.json"))
    handles = [Handle(j) for j in (1, 2, 3, 4, 5, 6, 8, 9)]
    obs = backend.poll(handles)
    seen = api.requests()
    # One Job list for all runs, one pod list because one failed: never a call per run.
    assert [(s.method, s.path) for s in seen] == [("GET", JOBS), ("GET", PODS)]
    assert all(s.query["labelSelector"] == ["gpupool.io/pool=p1"] for s in seen)
    states = {h.job_id: o.state for h, o in obs.items()}
    assert states == {
        1: RunState.QUEUED,
        2: RunState.RUNNING,
        3: RunState.EXITED,
        4: RunState.EXITED,
        5: RunState.EXITED,
        6: RunState.RUNNING,  # being deleted: its pods get their grace
        8: RunState.QUEUED,
        9: RunState.UNLAUNCHED,
    }
    assert obs[Handle(1)].detail == (
        "waiting for Kueue to admit it (LocalQueue vision): Job suspended"
    )
    assert obs[Handle(8)].detail == "admitted by Kueue, pods being created"
    assert obs[Handle(2)].ref == "kubernetes://lab/ml/gp-p1-2-0"
    done, failed, timed_out = (obs[Handle(j)].exit for j in (3, 4, 5))
    assert done is not None and (done.exit_code, done.reason) == (0, ExitReason.EXITED)
    assert done.end_time - done.start_time == pytest.approx(595)
    # The gang's pod 1 failed first (exit 3); pod 0 was stopped after it (143).
    assert failed is not None and (failed.exit_code, failed.signal) == (3, None)
    assert "BackoffLimitExceeded" in failed.message and "pod 1" in failed.message
    assert timed_out is not None and timed_out.reason is ExitReason.TIMEOUT


def test_a_poll_without_failures_makes_one_call_for_a_thousand_runs(
    api: RecordedApiServer, backend: Backend
) -> None:
    api.answer("GET", JOBS, Reply.fixture(200, "job_list.json"))
    obs = backend.poll([Handle(j) for j in range(100, 1100)] + [Handle(2)])
    assert [(s.method, s.path) for s in api.requests()] == [("GET", JOBS)]
    assert obs[Handle(2)].state is RunState.RUNNING and len(obs) == 1001


def test_failed_pods_not_listed_leave_the_code_unknown_in_words(
    api: RecordedApiServer, backend: Backend
) -> None:
    api.answer("GET", JOBS, Reply.fixture(200, "job_list.json"))
    api.answer("GET", PODS, Reply.json(500, {"kind": "Status", "code": 500}))
    failed = backend.poll([Handle(4)])[Handle(4)].exit
    assert failed is not None and failed.exit_code == 1
    assert "exit code not known" in failed.message


def test_cancel_deletes_the_job_in_the_foreground_and_remembers(
    api: RecordedApiServer, backend: Backend, tmp_path: Path
) -> None:
    api.answer("GET", f"{JOBS}/gp-p1-2-0", Reply.fixture(200, "job_running.json"))
    api.answer("DELETE", f"{JOBS}/gp-p1-2-0", Reply.fixture(200, "job_deleting.json"))
    assert backend.signal(Handle(2), StopKind.CANCEL) is True
    delete = api.requests()[-1]
    assert delete.method == "DELETE"
    assert delete.query == {"propagationPolicy": ["Foreground"]}
    # Once the Job is gone, the run is CANCELLED, for this daemon and for the next one.
    api.answer(
        "GET", JOBS, Reply.json(200, {"kind": "JobList", "apiVersion": "batch/v1", "items": []})
    )
    for each in (backend, backend_for(api.url, tmp_path)):
        obs = each.poll([Handle(2)])[Handle(2)]
        assert obs.state is RunState.EXITED and obs.exit is not None
        assert obs.exit.reason is ExitReason.CANCELLED


def test_cancel_of_nothing_or_of_an_ended_run_is_false(
    api: RecordedApiServer, backend: Backend
) -> None:
    api.answer("GET", f"{JOBS}/gp-p1-9-0", Reply.fixture(404, "status_job_not_found.json"))
    api.answer("GET", f"{JOBS}/gp-p1-3-0", Reply.fixture(200, "job_complete.json"))
    assert backend.signal(Handle(9), StopKind.CANCEL) is False
    assert backend.signal(Handle(3), StopKind.CANCEL) is False
    assert all(s.method == "GET" for s in api.requests())  # nothing deleted


def test_a_job_deleted_by_hand_ends_cancelled(api: RecordedApiServer, backend: Backend) -> None:
    api.answer(
        "GET",
        JOBS,
        Reply.fixture(200, "job_list.json"),
        Reply.json(200, {"kind": "JobList", "apiVersion": "batch/v1", "items": []}),
    )
    assert backend.poll([Handle(6)])[Handle(6)].state is RunState.RUNNING  # seen being deleted
    obs = backend.poll([Handle(6)])[Handle(6)]
    assert obs.exit is not None and obs.exit.reason is ExitReason.CANCELLED


def test_logs_of_a_rank_read_its_pod(api: RecordedApiServer, backend: Backend) -> None:
    api.answer("GET", PODS, Reply.fixture(200, "pod_list_running.json"))
    log0 = (FIXTURES / "pod_log_0.txt").read_bytes()
    log1 = (FIXTURES / "pod_log_1.txt").read_bytes()
    api.answer("GET", f"{PODS}/gp-p1-2-0-0-x0k7q/log", Reply(200, log0, "text/plain"))
    api.answer("GET", f"{PODS}/gp-p1-2-0-1-x1k7q/log", Reply(200, log1, "text/plain"))
    chunk = backend.logs(Handle(2), 6, 10)
    assert (chunk.data, chunk.offset, chunk.size) == (log0[6:16], 16, len(log0))
    rest = backend.logs(Handle(2), chunk.offset, 1 << 20)
    assert chunk.data + rest.data == log0[6:] and rest.offset == len(log0)
    assert backend.logs(Handle(2), 0, 1 << 20, rank=1).data == log1
    pods, log = api.requests()[:2]
    assert pods.query["labelSelector"] == ["gpupool.io/run=gp-p1-2-0"]
    assert log.query["container"] == ["main"]


def test_health_is_one_version_call(api: RecordedApiServer, backend: Backend) -> None:
    # The client asks for `/version/` (the API server serves it with or without the slash).
    api.answer("GET", "/version/", Reply.fixture(200, "version.json"))
    health = backend.health()
    assert health.reachable and "v1.30.2" in health.summary
    assert [s.path for s in api.requests()] == ["/version/"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _every_call_is_unknown(backend: Backend) -> None:
    handles = [Handle(1), Handle(2)]
    backend.launch(launch_request())  # returns: nothing raised, nothing recorded as refused
    assert {o.state for o in backend.poll(handles + [Handle(7, 1)]).values()} == {RunState.UNKNOWN}
    assert backend.signal(Handle(2), StopKind.CANCEL) is False
    assert backend.logs(Handle(2), 0, 100).data == b""
    assert not backend.health().reachable


def test_an_unreachable_api_server_is_unknown_at_once(tmp_path: Path) -> None:
    backend = backend_for(f"http://127.0.0.1:{_closed_port()}", tmp_path)
    began = time.monotonic()
    _every_call_is_unknown(backend)
    assert time.monotonic() - began < 10  # refused connections: no retries, no waits


def test_a_silent_api_server_is_unknown_within_the_timeout(tmp_path: Path) -> None:
    """A server that accepts connections and never answers: each call ends at its deadline."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        port = silent.getsockname()[1]
        backend = backend_for(f"http://127.0.0.1:{port}", tmp_path, request_timeout_s=0.3)
        began = time.monotonic()
        _every_call_is_unknown(backend)
        took = time.monotonic() - began
    # Five calls (launch, poll, signal's read, logs' pod list, health) of 0.3 s each, no
    # retries; generous for a busy machine, far below an unbounded wait.
    assert took < 15
