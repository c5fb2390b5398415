"""Request checks shared by the API's routes: integer bounds, FastAPI's validation errors in
the API's own error shape, and the header that tells a client it is talking to gpupool."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Annotated, Any

from fastapi import Path
from fastapi.responses import JSONResponse
from starlette.convertors import StringConvertor, register_url_convertor

# The store's integers (job ids, log offsets) are 64-bit: SQLite's INTEGER, PostgreSQL's
# BIGINT, a file offset. Larger numbers in a request are refused by name, never an
# OverflowError (HTTP 500).
MAX_INT64 = 2**63 - 1

# A job id in a route's path: a positive 64-bit integer, refused by name otherwise.
JobId = Annotated[int, Path(ge=1, le=MAX_INT64, description="a job id")]


class JobSegment(StringConvertor):
    """The path segment of a job id (`{job_id:job}`): any segment but the names of the
    routes beside it (POST /v1/jobs/batch, /v1/jobs/cancel), so that another method on
    those is theirs, refused 405, not a job id refused 422. Any other text still reaches
    the route, whose JobId names it (422)."""

    regex = "(?!(?:batch|cancel)$)[^/]+"


register_url_convertor("job", JobSegment())


def invalid_field(field: str, message: str) -> JSONResponse:
    """422 in the API's error shape for one bad query or body field."""
    body = {
        "error": "invalid_request",
        "message": message,
        "errors": [{"field": field, "message": message}],
    }
    return JSONResponse(body, status_code=422)


NESTED_TOO_DEEPLY = (
    "body: the JSON nests arrays or objects too deeply to be read (hundreds of levels; "
    "a request to gpupool nests a few)"
)


def nested_too_deeply() -> JSONResponse:
    """400 in the API's error shape for a body whose JSON nests deeper than the decoder can
    follow (its RecursionError): the same answer from every route (issue 30, item 7)."""
    body = {
        "error": "invalid_request",
        "message": NESTED_TOO_DEEPLY,
        "errors": [{"field": "body", "message": NESTED_TOO_DEEPLY}],
    }
    return JSONResponse(body, status_code=400)


def caused_by_nesting(exc: BaseException) -> bool:
    """Whether `exc` is, or was raised from, a RecursionError (FastAPI raises its 400
    "error parsing the body" from the decoder's)."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain is short; a cycle in it must not loop
        if seen is None:
            return False
        if isinstance(seen, RecursionError):
            return True
        seen = seen.__cause__
    return False


# Must match gpupool.client.errors.API_HEADER (the api layer does not import the client).
API_HEADER = "x-gpupool-version"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


class IdentifyAsGpupool:
    """Pure ASGI middleware adding `X-Gpupool-Version` to every HTTP answer, errors and 404s
    included, so a client pointed at some other server can say so instead of misreading it."""

    def __init__(self, app: Asgi, version: str) -> None:
        self.app = app
        self.header = (API_HEADER.encode(), version.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_identified(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), self.header]
            await send(message)

        await self.app(scope, receive, send_identified)


def replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` for an app after a middleware read the whole `body`: it first gives the
    body, in one message, then whatever comes after (a disconnect)."""
    given: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return given.pop() if given else await receive()

    return replay


def field_errors(errors: Sequence[Any]) -> list[dict[str, str]]:
    """FastAPI's validation errors as [{"field", "message"}]: the field is the location
    without "path"/"query"/"body" (`job_id`, `offset`, `spec.gpus`), and the message says
    what was wrong and what was given."""
    out = []
    for e in errors:
        loc = [str(part) for part in e.get("loc", ()) if part not in ("path", "query", "body")]
        field = ".".join(loc) or "body"
        message = str(e.get("msg", "invalid"))
        message = message[:1].lower() + message[1:]
        if e.get("type") != "missing" and "input" in e:
            try:
                given = repr(e["input"])
            except RecursionError:  # a value nested hundreds deep: too deep to show
                given = "a value nested too deeply to show"
            message += f", got {given if len(given) <= 60 else given[:57] + '...'}"
        out.append({"field": field, "message": message})
    return out


async def send_error(
    send: Send,
    status: int,
    code: str,
    message: str,
    *,
    version: str,
    headers: Sequence[tuple[bytes, bytes]] = (),
    close: bool = False,
) -> None:
    """An answer in the API's error shape ({"error", "message"}), from ASGI middleware that
    refuses a request before the app sees it; `close` ends the connection after it (a
    request whose body is left unread cannot be followed by another on that connection)."""
    import json

    body = json.dumps({"error": code, "message": message}).encode()
    head = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (API_HEADER.encode(), version.encode()),
        *headers,
    ]
    if close:
        head.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})
