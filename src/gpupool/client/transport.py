"""HTTP/1.1 on a socket, with the standard library: one request, its answer read to EOF or,
on a connection kept for the next request, as far as its framing says; and what the
client's settings say about where and how long (client/http.py's `Client` is built on it).

http.client would import the email package (~20 ms) on every CLI call; the daemon's
answers are simple (status, a few headers, a Content-Length or chunked body).
"""

from __future__ import annotations

import json
import os

from gpupool.client.errors import (
    ApiError,
    BadClientSetting,
    ConnectionLost,
    NotAGpupoolDaemon,
    PoolUnreachable,
    SpeaksTls,
)
from gpupool.client.wire_json import JsonValue

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl
    from _socket import socket as Socket  # socket.socket's base: what both paths have
    from collections.abc import Mapping

DEFAULT_TIMEOUT_S = 30.0
# The first byte of a TLS record that a TLS listener may send a plain request: an alert or
# a handshake message (then the version's major byte, 3).
TLS_RECORDS = (b"\x15", b"\x16")


class ClosedUnanswered(ConnectionLost):
    """The connection closed with no HTTP answer at all (not a byte of one): what a TLS
    listener does to a plain request, and what `tls_instead` looks into."""


def exchange_kept(
    sock: Socket,
    method: str,
    path: str,
    body: bytes | None,
    host: str,
    token: str | None = None,
) -> tuple[int, dict[str, str], bytes, bool]:
    """One HTTP/1.1 request on a connection that may carry the next one too (keep-alive):
    (status, headers, body, whether the connection may be used again). The answer is read
    by its framing (Content-Length or chunked) and the connection kept when the daemon did
    not say `Connection: close`; an answer with neither is read to EOF.

    http.client would import the email package (~20 ms) on every CLI call; the daemon's
    answers are simple, so this is enough. Raises ConnectionLost when the answer is cut
    short, NotAGpupoolDaemon (without its `where`) when it is not HTTP, ClosedUnanswered
    when not a byte of an answer came: on a connection used before, the daemon may have
    closed it idle before reading the request (client/kept_connections.py); so may a reset
    or broken pipe."""
    failed = _send(sock, method, path, body, host, token)
    if failed is not None:
        raw = read_answer(sock, quietly=True)
        if not raw:
            raise failed
        return (*parsed_answer(raw), False)
    raw, reusable = read_framed(sock)
    return (*parsed_answer(raw), reusable)


def _send(
    sock: Socket,
    method: str,
    path: str,
    body: bytes | None,
    host: str,
    token: str | None,
) -> OSError | None:
    """Write the request; the error when the daemon closed the connection while it was
    written (it may refuse a request before reading all of it, a body over its limit: 413,
    and then close: its answer is what the caller needs)."""
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Accept: application/json"]
    if token is not None:
        head.append(f"Authorization: Bearer {token}")
    if body is not None or method not in ("GET", "HEAD"):
        # Every request that changes something says it is JSON, body or not: over TCP the
        # daemon refuses any other (a browser cannot send it cross-site: docs/security.md).
        payload = body or b""
        head += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + (body or b""))
    except (BrokenPipeError, ConnectionResetError) as exc:
        return exc
    return None


def parsed_answer(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers by lower-case name, body) of a whole answer's bytes."""
    header_blob, sep, payload = raw.partition(b"\r\n\r\n")
    if not sep:
        if not raw or raw[:1] in TLS_RECORDS and raw[1:2] == b"\x03":  # nothing, or TLS's alert
            raise ClosedUnanswered("", "the connection was closed before an answer")
        raise ConnectionLost("", "the answer was cut short")
    lines = header_blob.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise NotAGpupoolDaemon("", f"it does not speak HTTP: {lines[0][:40]!r}")
    status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        payload = dechunk(payload)
    elif headers.get("content-length", "").isdigit():
        payload = payload[: int(headers["content-length"])]
    return status, headers, payload


def read_framed(sock: Socket) -> tuple[bytes, bool]:
    """One answer's bytes, read as far as its framing says it goes, and whether the
    connection may carry another request. An answer without a length or chunks (or one
    that says `Connection: close`) is read to EOF and ends the connection."""
    buffer = bytearray()
    while (head_end := buffer.find(b"\r\n\r\n")) < 0:
        if not _more(sock, buffer):
            return bytes(buffer), False
    fields = {}
    for line in bytes(buffer[:head_end]).decode("latin-1").split("\r\n")[1:]:
        key, _, value = line.partition(":")
        fields[key.strip().lower()] = value.strip().lower()
    start = head_end + 4
    keep = fields.get("connection") != "close"
    if fields.get("content-length", "").isdigit():
        end = start + int(fields["content-length"])
        while len(buffer) < end:
            if not _more(sock, buffer):
                return bytes(buffer), False
        return bytes(buffer), keep and len(buffer) == end
    if fields.get("transfer-encoding") == "chunked":
        while (last := _chunked_end(buffer, start)) is None:
            if not _more(sock, buffer):
                return bytes(buffer), False
        return bytes(buffer), keep and len(buffer) == last
    while _more(sock, buffer):
        pass
    return bytes(buffer), False


def _more(sock: Socket, buffer: bytearray) -> bool:
    """Read what has come into `buffer`; False at EOF, or at a reset after the answer began
    (a cut answer is told by its parse; a reset before it is raised, as `read_answer`)."""
    try:
        chunk = sock.recv(1 << 20)  # a listing of 10,000 jobs is ~13 MB
    except (ConnectionResetError, BrokenPipeError):
        if not buffer:
            raise
        return False
    buffer += chunk
    return bool(chunk)


def _chunked_end(buffer: bytearray, pos: int) -> int | None:
    """Where a chunked body starting at `pos` ends (after its last chunk and the empty
    trailer: the daemon sends no trailers), or None while it has not all come."""
    while True:
        line_end = buffer.find(b"\r\n", pos)
        if line_end < 0:
            return None
        try:
            size = int(bytes(buffer[pos:line_end]).split(b";")[0], 16)
        except ValueError:
            return len(buffer)  # not chunks: the parse says the answer was cut short
        if size == 0:
            end = line_end + 4  # the size line's CRLF, then the empty trailer's
            return end if len(buffer) >= end else None
        pos = line_end + 2 + size + 2
        if len(buffer) < pos:
            return None


def read_answer(sock: Socket, quietly: bool = False) -> bytes:
    """Everything the daemon sends, to EOF; `quietly`: what came before a reset."""
    chunks = []
    while True:
        try:
            chunk = sock.recv(1 << 20)  # a listing of 10,000 jobs is ~13 MB
        except (ConnectionResetError, BrokenPipeError):
            if not quietly:
                raise
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def dechunk(data: bytes) -> bytes:
    out: list[bytes] = []
    pos = 0
    try:
        while True:
            end = data.index(b"\r\n", pos)
            size = int(data[pos:end].split(b";")[0], 16)
            if size == 0:
                return b"".join(out)
            out.append(data[end + 2 : end + 2 + size])
            pos = end + 2 + size + 2
    except ValueError:
        raise ConnectionLost("", "the answer was cut short") from None


def timeout_from_env() -> float:
    text = os.environ.get("GPUPOOL_TIMEOUT")
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 86400:
        raise BadClientSetting(
            "GPUPOOL_TIMEOUT", f"must be a number of seconds from 0 to 86400, got {text!r}"
        )
    return value


def tcp_address(url: str, source: str) -> tuple[str, int, bool]:
    """(host, port, tls) of an http:// or https:// URL; BadClientSetting naming --url or
    GPUPOOL_URL."""
    from urllib.parse import urlsplit  # only for a pool over TCP (~2 ms)

    example = "expected http(s)://HOST:PORT, e.g. http://127.0.0.1:8765"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port out of range or not a number
        raise BadClientSetting(source, f"{exc} in {url!r} ({example})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadClientSetting(source, f"not an http:// or https:// URL: {url!r} ({example})")
    tls = parts.scheme == "https"
    return parts.hostname, port or (443 if tls else 80), tls


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """The context that checks the daemon's certificate: against `ca_file`
    ($GPUPOOL_CA_CERT, for a self-signed or private CA) or the system's CAs."""
    import ssl

    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise BadClientSetting("GPUPOOL_CA_CERT", f"cannot load {ca_file}: {why}") from None


TLS_PROBE_TIMEOUT_S = 5.0


def tls_instead(
    lost: PoolUnreachable, url: str | None, address: tuple[str, int] | None, plain: bool
) -> PoolUnreachable:
    """`lost`, or SpeaksTls when `lost` is a plain http:// request closed with no HTTP
    answer (ClosedUnanswered: what a daemon started with --tls-cert does to one) and the
    listener at `address` serves TLS. Found by a TLS handshake of its own (certificate not
    checked, nothing sent: it only tells which protocol answers), so only on that failing
    path: a reset or an answer cut short (a fault, not TLS) costs no second connection."""
    if not plain or not isinstance(lost, ClosedUnanswered):
        return lost
    if address is None or url is None or not _handshakes(address):
        return lost
    return SpeaksTls(lost.where, "https://" + url.split("://", 1)[1].rstrip("/"))


def _handshakes(address: tuple[str, int]) -> bool:
    """Whether a TLS handshake with `address` completes."""
    import socket
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(address, timeout=TLS_PROBE_TIMEOUT_S) as raw:
            with context.wrap_socket(raw, server_hostname=address[0]):
                return True
    except (OSError, ValueError):  # ssl.SSLError is an OSError: not TLS, or gone
        return False


# What `urllib.parse.quote` leaves as it is with safe="": importing urllib.parse (and the
# ipaddress it imports) costs every CLI command ~2 ms.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def quoted(text: str, plus: bool = False) -> str:
    """`text` as one part of a URL (UTF-8, percent-encoded): `quote(text, safe="")`, or
    with `plus` `quote_plus(text, safe="")` (a space as +: a query's key or value)."""
    out = []
    for byte in text.encode():
        if byte in _UNRESERVED:
            out.append(chr(byte))
        elif plus and byte == 32:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def query_string(items: Mapping[str, str | int]) -> str:
    """`urlencode(items)`: key=value pairs, each quoted, joined by &."""
    return "&".join(f"{quoted(k, True)}={quoted(str(v), True)}" for k, v in items.items())


def decode(data: bytes) -> JsonValue:
    try:
        decoded: JsonValue = json.loads(data) if data else {}
    except ValueError:
        return {"message": data.decode(errors="replace")}
    return decoded


def api_error(status: int, decoded: JsonValue) -> ApiError:
    if isinstance(decoded, dict):
        code = str(decoded.get("error", "error"))
        message = str(decoded.get("message") or decoded.get("detail") or f"HTTP {status}")
        return ApiError(status, code, message, decoded)
    return ApiError(status, "error", str(decoded), {})
