"""A submission answered below FastAPI (api/quick_submit.py) gets the answer the FastAPI route
gives, for good and bad requests alike.

Two fresh daemons get the same requests in the same order. One gets them as
`application/json`, which the quick path answers when the body is plain; the other as
`application/vnd.gpupool+json`, which FastAPI reads as JSON too but the quick path passes on
(the Unix socket takes any content type; TCP insists on application/json). The answers must
agree: status, the headers every answer carries, and the body, apart from what names the pool
itself (its state directory) and the clock.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from integration.pool_harness import Pool

QUICK = "application/json"
ROUTED = "application/vnd.gpupool+json"
HELD = {"command": ["true"], "gpus": 1, "workdir": "/", "begin_time": 4102444800.0}  # 2100

CASES: list[tuple[str, bytes]] = [
    ("token", json.dumps({"spec": HELD, "token": "first"}).encode()),
    ("same token again", json.dumps({"spec": HELD, "token": "first"}).encode()),
    ("no token", json.dumps({"spec": HELD}).encode()),
    ("a user in the body", json.dumps({"spec": HELD, "token": None, "user": "mallory"}).encode()),
    ("an array", json.dumps({"spec": {**HELD, "array": "0-2"}, "token": "arr"}).encode()),
    ("a field out of range", json.dumps({"spec": {**HELD, "gpus": -1}}).encode()),
    ("an unknown field", json.dumps({"spec": {**HELD, "colour": "red"}}).encode()),
    ("more GPUs than the pool", json.dumps({"spec": {**HELD, "gpus": 64}}).encode()),
    ("no such workdir", json.dumps({"spec": {**HELD, "workdir": "/no/such/dir"}}).encode()),
    ("no such project", json.dumps({"spec": {**HELD, "project": "nosuch"}}).encode()),
    ("after no such job", json.dumps({"spec": {**HELD, "after": ["999"]}}).encode()),
    ("spec not an object", json.dumps({"spec": [], "token": "t"}).encode()),
    ("no spec", json.dumps({"token": "t"}).encode()),
    ("token too long", json.dumps({"spec": HELD, "token": "x" * 129}).encode()),
    ("token a number", json.dumps({"spec": HELD, "token": 5}).encode()),
    ("not JSON", b"{not json"),
    ("a list", b"[]"),
    ("not UTF-8", b'{"spec": "\xff"}'),
]

# What the engine's last pass said of the job: there or not by when the pass ran (a job newer
# than the last pass has none yet), whichever path answered.
PASS_FIELDS = ("why", "wait", "estimated_start", "reservation", "priority_factors")
COMMON_HEADERS = ("content-type", "x-gpupool-version", "x-content-type-options")


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pool, Pool]]:
    root = tmp_path_factory.mktemp("quick")
    quick, routed = Pool(root / "quick"), Pool(root / "routed")
    try:
        yield quick.start(), routed.start()
    finally:
        quick.cleanup()
        routed.cleanup()


def _post(pool: Pool, body: bytes, content_type: str) -> tuple[int, dict[str, str], bytes]:
    """POST /v1/jobs over the pool's Unix socket, one request per connection."""
    head = (
        f"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(pool.client.socket))
        s.sendall(head + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head_bytes, _, payload = data.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, payload


def _comparable(payload: bytes, pool: Pool) -> object:
    """The answer's JSON with the pool's own state directory, the clock (a number within
    ten minutes of now: when it was submitted, its events' times) and the last pass's
    words (PASS_FIELDS) taken out."""
    now = time.time()

    def clockless(value: object) -> object:
        if isinstance(value, dict):
            return {k: clockless(v) for k, v in value.items() if k not in PASS_FIELDS}
        if isinstance(value, list):
            return [clockless(v) for v in value]
        if isinstance(value, float):
            return "<now>" if abs(value - now) < 600 else value
        return value

    return clockless(json.loads(payload.decode().replace(str(pool.root), "<pool>")))


@pytest.mark.parametrize(("case", "body"), CASES, ids=[case for case, _ in CASES])
def test_the_quick_path_answers_as_the_route(
    pools: tuple[Pool, Pool], case: str, body: bytes
) -> None:
    quick, routed = pools
    q_status, q_headers, q_body = _post(quick, body, QUICK)
    r_status, r_headers, r_body = _post(routed, body, ROUTED)
    assert q_status == r_status, (case, q_body, r_body)
    assert _comparable(q_body, quick) == _comparable(r_body, routed), case
    for name in COMMON_HEADERS:
        assert q_headers.get(name) == r_headers.get(name), (case, name)
    assert q_headers["content-length"] == str(len(q_body))
    assert _stored(quick) == _stored(routed), case  # and the same jobs were stored


def _stored(pool: Pool) -> list[tuple[object, ...]]:
    jobs = pool.client.jobs(include_finished=True)
    return [(j.id, j.user, j.state, j.array_id, j.project) for j in jobs]


def test_a_submission_cut_off_mid_body_leaves_the_daemon_answering(
    pools: tuple[Pool, Pool],
) -> None:
    quick, _ = pools
    before = len(quick.client.jobs(include_finished=True))
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(quick.client.socket))
        s.sendall(
            b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b'Content-Length: 500\r\n\r\n{"spec": {"command": ["true"]'
        )
    assert _post(quick, json.dumps({"spec": HELD}).encode(), QUICK)[0] == 201
    assert len(quick.client.jobs(include_finished=True)) == before + 1
