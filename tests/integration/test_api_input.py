"""Every bad request to the API is a 4xx in the API's error shape naming the field; never a
500. And every answer says it comes from gpupool (the header clients check)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from integration.pool_harness import Pool

BIG = (str(2**63), str(10**30))


@pytest.fixture(scope="module")
def api_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    pool = Pool(tmp_path_factory.mktemp("api") / "pool").start()
    try:
        pool.wait(pool.submit("--", "true"))  # job 1: offsets are checked on a real job
        yield pool
    finally:
        pool.cleanup()


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        *[("GET", f"/v1/jobs/{n}", None, "job_id") for n in BIG],
        *[("POST", f"/v1/jobs/{n}/cancel", {}, "job_id") for n in BIG],
        *[("GET", f"/v1/jobs/{n}/log", None, "job_id") for n in BIG],
        ("GET", "/v1/jobs/0", None, "job_id"),
        ("GET", "/v1/jobs/abc", None, "job_id"),
        *[("GET", f"/v1/jobs/1/log?offset={n}", None, "offset") for n in BIG],
        ("GET", "/v1/jobs/1/log?offset=-1", None, "offset"),
        ("GET", "/v1/jobs?all=maybe", None, "all"),
        ("GET", "/v1/jobs?id=1,x", None, "id"),
        ("GET", "/v1/jobs?id=0", None, "id"),
        ("GET", f"/v1/jobs?id={2**63}", None, "id"),
        ("GET", "/v1/jobs?id=" + ",".join(str(n) for n in range(1, 1002)), None, "id"),
        ("POST", "/v1/jobs", {"token": "t"}, "spec"),
        ("POST", "/v1/jobs", {"spec": [], "token": "t"}, "spec"),
        ("PUT", "/v1/projects/defaults/u", {"project": 7}, "project"),
    ],
)
def test_bad_requests_are_4xx_naming_the_field(
    api_pool: Pool, method: str, path: str, body: object, field: str
) -> None:
    status, headers, data = api_pool.client.request_raw(method, path, body)
    answer = json.loads(data)
    assert 400 <= status < 500, (status, answer)
    assert answer["error"] == "invalid_request", answer
    assert answer["message"].startswith(f"{field}: "), answer
    assert [e["field"] for e in answer["errors"]] == [field], answer
    assert headers["x-gpupool-version"]


def test_an_offset_past_the_end_of_the_log_reads_nothing(api_pool: Pool) -> None:
    chunk = api_pool.client.log(1, 2**63 - 1)
    assert (chunk.data, chunk.offset, chunk.state) == (b"", 2**63 - 1, "SUCCEEDED")


def test_every_answer_names_gpupool(api_pool: Pool) -> None:
    for path in ("/healthz", "/v1/jobs", "/v1/nosuch", "/v1/jobs/424242"):
        _, headers, _ = api_pool.client.request_raw("GET", path)
        assert headers.get("x-gpupool-version"), path


@pytest.mark.parametrize(
    "path",
    [
        "/v1/jobs/..%2F..%2F..%2Fetc%2Fpasswd/log",
        "/v1/jobs/1/../../../../etc/passwd",
        "/v1/jobs/1%2F..%2F..%2Fstate.db/log",
        "/v1/jobs/%2E%2E/log",
        "/v1/jobs/1/log/../../../../etc/shadow",
    ],
)
def test_a_log_path_traversal_reads_no_file(api_pool: Pool, path: str) -> None:
    # A log is found by the job's id alone (the executor's layout), never by a path the
    # client sends: a traversal is a bad id or an unknown route, and no file's bytes.
    status, _, data = api_pool.client.request_raw("GET", path, None)
    assert 400 <= status < 500, (status, data[:200])
    assert b"root:" not in data and b"SQLite format" not in data


def test_an_unknown_field_in_a_spec_is_refused_by_name(api_pool: Pool) -> None:
    body = {"spec": {"command": ["true"], "gpu": 1}, "token": "unknown-field"}
    status, _, data = api_pool.client.request_raw("POST", "/v1/jobs", body)
    answer = json.loads(data)
    assert 400 <= status < 500, (status, answer)
    assert "gpu" in answer["message"], answer
    assert api_pool.client.jobs(include_finished=True)[-1].id == 1  # nothing queued


def test_jobs_are_listed_by_their_ids_finished_or_not(api_pool: Pool) -> None:
    """`GET /v1/jobs?id=...` (squeue -j): the jobs named, in one answer, the finished ones
    with `all`; ids of no job are left out."""
    held = api_pool.submit("--begin", "now+300days", "--", "true")
    both = api_pool.client.job_page(include_finished=True, ids=[held, 1, 424242])
    assert [(j.id, j.state.value) for j in both.jobs] == [(1, "SUCCEEDED"), (held, "PENDING")]
    assert both.total == 2
    active = api_pool.client.job_page(ids=[1, held])
    assert [j.id for j in active.jobs] == [held]
    api_pool.cancel(held)


# Every route that reads a JSON body (issue 30, item 7): the plain submission answered below
# FastAPI's routing (api/quick_submit.py), and the routes FastAPI parses for.
JSON_BODY_ROUTES = [
    ("POST", "/v1/jobs"),
    ("POST", "/v1/jobs/batch"),
    ("PATCH", "/v1/jobs/1"),
    ("POST", "/v1/jobs/1/signal"),
    ("POST", "/v1/projects"),
    ("PATCH", "/v1/projects/nosuch"),
    ("PUT", "/v1/projects/defaults/nobody"),
    ("POST", "/v1/tokens"),
    ("POST", "/v1/benchmarks"),
]
DEPTH = 1000
NESTED_BODIES = {
    "unclosed": b"[" * DEPTH,
    "closed": b"[" * DEPTH + b"]" * DEPTH,
    "in-a-field": b'{"spec": {"command": ' + b"[" * DEPTH + b"]" * DEPTH + b"}}",
}


def _raw_json(pool: Pool, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
    """`body` sent as it is, as JSON, on the pool's Unix socket."""
    from gpupool.client.transport import exchange_kept

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(pool.state_dir / "gpupool.sock"))
        status, headers, answer, _ = exchange_kept(sock, method, path, body, "localhost")
        return status, headers, answer


@pytest.mark.parametrize("nesting", sorted(NESTED_BODIES))
@pytest.mark.parametrize(("method", "path"), JSON_BODY_ROUTES)
def test_json_nested_too_deep_is_400_naming_the_nesting(
    api_pool: Pool, method: str, path: str, nesting: str
) -> None:
    """1,000 nested arrays are refused with the API's error naming the nesting, never a
    500 (RecursionError in the JSON decoder) nor FastAPI's anonymous "error parsing"."""
    status, headers, data = _raw_json(api_pool, method, path, NESTED_BODIES[nesting])
    assert status == 400, (status, data[:300])
    answer = json.loads(data)
    assert answer["error"] == "invalid_request", answer
    assert "nest" in answer["message"], answer
    assert headers["x-gpupool-version"]
