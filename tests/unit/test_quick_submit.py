"""QuickSubmit (api/quick_submit.py) answers a plain submission itself and passes everything
else on with its body intact; exceptions are answered by the app's handlers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse

from gpupool.api.checks import Message, Scope
from gpupool.api.quick_submit import QuickSubmit
from gpupool.core.access import Caller, Via

ALICE = Caller("alice", Via.UNIX, uid=1000)


class Refused(Exception):
    pass


class Unhandled(Exception):
    pass


class Harness:
    """A QuickSubmit over an inner app that records what reached it."""

    def __init__(self, raises: Exception | None = None) -> None:
        self.passed_on: list[bytes] = []  # the bodies the inner app read
        self.submitted: list[tuple[str, dict[str, Any], str | None]] = []
        self.raises = raises
        handlers = {Refused: self._refused}
        self.quick = QuickSubmit(self._inner, self._submit, self._caller_of, handlers, 8)

    @staticmethod
    def _refused(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": "refused", "message": str(exc)}, status_code=422)

    async def _caller_of(self, _: Request) -> Caller:
        return ALICE

    async def _submit(
        self, caller: Caller, spec: dict[str, Any], token: str | None
    ) -> dict[str, object]:
        if self.raises is not None:
            raise self.raises
        self.submitted.append((caller.name, spec, token))
        return {"id": len(self.submitted), "user": caller.name}

    async def _inner(self, scope: Scope, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.passed_on.append(body)
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def post(
        self,
        pieces: list[bytes],
        content_type: bytes | None = b"application/json",
        path: str = "/v1/jobs",
        method: str = "POST",
        disconnect: bool = False,
    ) -> list[Message]:
        headers = [] if content_type is None else [(b"content-type", content_type)]
        scope = {"type": "http", "method": method, "path": path, "headers": headers}
        scope["root_path"] = ""
        incoming: list[Message] = [
            {"type": "http.request", "body": piece, "more_body": n < len(pieces) - 1}
            for n, piece in enumerate(pieces)
        ]
        if disconnect:
            incoming[-1] = {"type": "http.disconnect"}
        incoming.append({"type": "http.disconnect"})
        sent: list[Message] = []

        async def receive() -> Message:
            return incoming.pop(0)

        async def send(message: Message) -> None:
            sent.append(message)

        asyncio.run(self.quick(scope, receive, send))
        return sent


def _status(sent: list[Message]) -> int:
    return int(sent[0]["status"])


def test_a_plain_submission_is_answered_here_in_json() -> None:
    h = Harness()
    sent = h.post([b'{"spec": {"command": ["true"]},', b' "token": "t1", "user": "bob"}'])
    assert _status(sent) == 201
    assert json.loads(sent[1]["body"]) == {"id": 1, "user": "alice"}
    assert dict(sent[0]["headers"])[b"content-length"] == str(len(sent[1]["body"])).encode()
    assert h.submitted == [("alice", {"command": ["true"]}, "t1")]
    assert h.passed_on == []


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'"a string"',
        b"[]",
        b'{"token": "t"}',
        b'{"spec": [], "token": "t"}',
        b'{"spec": {}, "token": 7}',
        b'{"spec": {}, "token": "123456789"}',  # over max_token (8)
        b"\xff\xfe",
    ],
)
def test_a_body_not_of_the_plain_shape_goes_on_whole(body: bytes) -> None:
    h = Harness()
    sent = h.post([body[:3], body[3:]])
    assert _status(sent) == 299
    assert h.passed_on == [body]
    assert h.submitted == []


@pytest.mark.parametrize(
    ("content_type", "path", "method"),
    [
        (b"application/vnd.gpupool+json", "/v1/jobs", "POST"),
        (b"text/plain", "/v1/jobs", "POST"),
        (None, "/v1/jobs", "POST"),
        (b"application/json", "/v1/jobs/", "POST"),
        (b"application/json", "/v1/jobs/batch", "POST"),
        (b"application/json", "/v1/jobs", "PUT"),
    ],
)
def test_other_requests_go_on_untouched(content_type: bytes | None, path: str, method: str) -> None:
    h = Harness()
    sent = h.post([b'{"spec": {}}'], content_type=content_type, path=path, method=method)
    assert (_status(sent), h.passed_on, h.submitted) == (299, [b'{"spec": {}}'], [])


def test_a_json_content_type_with_a_charset_is_plain() -> None:
    h = Harness()
    assert _status(h.post([b'{"spec": {}}'], b"Application/JSON; charset=utf-8")) == 201


def test_a_client_gone_before_its_body_ends_gets_nothing_and_submits_nothing() -> None:
    h = Harness()
    assert h.post([b'{"spec": ', b"{}}"], disconnect=True) == []
    assert (h.submitted, h.passed_on) == ([], [])


def test_an_exception_is_answered_by_the_apps_handler() -> None:
    h = Harness(raises=Refused("no room"))
    sent = h.post([b'{"spec": {}}'])
    assert _status(sent) == 422
    assert json.loads(sent[1]["body"]) == {"error": "refused", "message": "no room"}


def test_an_exception_without_a_handler_goes_up() -> None:
    h = Harness(raises=Unhandled("boom"))
    with pytest.raises(Unhandled):
        h.post([b'{"spec": {}}'])
