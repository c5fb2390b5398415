"""`POST /v1/jobs` answered below FastAPI's routing: the API's most frequent request.

Under 100 clients submitting at once (bench/load.py), FastAPI's part of a submission (route
matching, dependency solving, body and answer validation, its exception and exit-stack
layers) was two thirds of the event loop's time for it, and the event loop's thread sets the
pace (docs/benchmarks.md, issue 13). This ASGI layer sits inside the app's own middleware
(the Host and content-type guards, the same-origin and version headers, the body limit and
the rate limit all still apply) and answers a well-formed submission itself.

Contract: the answer is the FastAPI route's (app.py, `submit`), because
- a request that is not the plain shape goes on to FastAPI untouched, its body replayed:
  not sent as `application/json`, not JSON (nested too deeply to decode included: FastAPI's
  decoder fails on it too, and the app's handler names the nesting, 400), not a JSON object, `spec` not an object, or `token` not
  absent, null or a string of at most `max_token` characters. Its validation errors stay
  FastAPI's (422 naming the field);
- a plain one runs the route's own code (`SubmitAnswer`: who the caller is, may they submit,
  the submission), and whatever that raises is answered by the app's exception handlers,
  looked up as Starlette's ExceptionMiddleware does (401, 403, 400 naming the field, 422,
  507); one with no handler goes up to the server-error layer (500), as from the route;
- the answer's JSON is made by pydantic's serializer for the route's return type, as
  FastAPI makes it.
tests/integration/test_quick_submit.py holds both paths to the same answers.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from pydantic import TypeAdapter
from starlette.requests import Request
from starlette.responses import Response

from gpupool.api.checks import Asgi, Receive, Scope, Send, replaying
from gpupool.core.access import Caller
from gpupool.core.wire_shapes import JobWire

PATH = "/v1/jobs"
JSON_TYPE = b"application/json"

# The route's return type: its answer serialized as FastAPI serializes the route's.
_ANSWER = TypeAdapter(dict[str, object])


class SubmitAnswer(Protocol):
    """The submit route's work, shared with it: the caller's submission of `spec` (the
    wire form) with `token`, answered as a job on the wire."""

    async def __call__(
        self, caller: Caller, spec: dict[str, Any], token: str | None
    ) -> JobWire: ...


CallerOf = Callable[[Request], Awaitable[Caller]]
ExceptionHandlers = Mapping[Any, Callable[..., Any]]  # Starlette's own typing of the map


class QuickSubmit:
    """Pure ASGI middleware: a plain `POST /v1/jobs` is answered here (module docstring);
    every other request goes on to `app`."""

    def __init__(
        self,
        app: Asgi,
        submit: SubmitAnswer,
        caller_of: CallerOf,
        handlers: ExceptionHandlers,
        max_token: int,
    ) -> None:
        self.app = app
        self.submit = submit
        self.caller_of = caller_of
        self.handlers = handlers
        self.max_token = max_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _is_submission(scope):
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:  # the client went away before sending it all: nobody to answer
            return
        plain = self._plain(body)
        if plain is None:
            await self.app(scope, replaying(body, receive), send)
            return
        spec, token = plain
        request = Request(scope, replaying(body, receive))
        try:
            answer = await self.submit(await self.caller_of(request), spec, token)
        except Exception as exc:
            handler = _handler_for(self.handlers, exc)
            if handler is None:
                raise
            response = handler(request, exc)
            if inspect.isawaitable(response):
                response = await response
            assert isinstance(response, Response)
            await response(scope, receive, send)
            return
        content = _ANSWER.dump_json(dict(answer))  # its keys as they are: a shallow copy
        headers = [
            (b"content-length", str(len(content)).encode()),
            (b"content-type", JSON_TYPE),
        ]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def _plain(self, body: bytes) -> tuple[dict[str, Any], str | None] | None:
        """The spec and token of a body of the plain shape, else None."""
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deeply
            return None  # for FastAPI to name what is wrong (app.py: nested_too_deeply)
        if not isinstance(parsed, dict):
            return None
        spec, token = parsed.get("spec"), parsed.get("token")
        if not isinstance(spec, dict):
            return None
        if token is not None and not (isinstance(token, str) and len(token) <= self.max_token):
            return None
        return spec, token


def _is_submission(scope: Scope) -> bool:
    """A POST to /v1/jobs sent as JSON, at the app's root."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PATH:
        return False
    if scope.get("root_path", ""):
        return False
    for name, value in scope["headers"]:
        if name == b"content-type":
            kind: bytes = value.split(b";", 1)[0].strip().lower()
            return kind == JSON_TYPE
    return False


async def _read_body(receive: Receive) -> bytes | None:
    """The request's whole body (the body limit outside has bounded it), or None when the
    client disconnected first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _handler_for(handlers: ExceptionHandlers, exc: Exception) -> Callable[..., Any] | None:
    """The app's handler of `exc`: the one registered for its class or the nearest base,
    as Starlette's ExceptionMiddleware finds it."""
    for cls in type(exc).__mro__:
        if cls in handlers:
            return handlers[cls]
    return None
