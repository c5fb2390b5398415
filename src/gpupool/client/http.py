"""HTTP over the daemon's Unix socket (or TCP for remote pools), with the standard library.

httpx would cost ~130 ms and http.client ~20 ms of import time on every CLI call;
`gpupool queue` must feel instant.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from gpupool.core.paths import socket_path, state_dir


class DaemonNotRunning(ConnectionError):
    pass


class ApiError(RuntimeError):
    def __init__(self, status: int, code: str, message: str, body: dict[str, Any]) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.body = body


def _exchange(
    sock: socket.socket, method: str, path: str, body: bytes | None, host: str
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request with `Connection: close`, read to EOF.

    http.client would import the email package (~20 ms) on every CLI call; the daemon's
    answers are simple (status, a few headers, a Content-Length body), so this is enough.
    """
    head = [
        f"{method} {path} HTTP/1.1",
        f"Host: {host}",
        "Connection: close",
        "Accept: application/json",
    ]
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + (body or b""))
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    raw = b"".join(chunks)
    header_blob, sep, payload = raw.partition(b"\r\n\r\n")
    if not sep:
        raise ConnectionError("the daemon closed the connection mid-answer")
    lines = header_blob.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        payload = _dechunk(payload)
    elif "content-length" in headers:
        payload = payload[: int(headers["content-length"])]
    return status, headers, payload


def _dechunk(data: bytes) -> bytes:
    out, pos = [], 0
    while True:
        end = data.index(b"\r\n", pos)
        size = int(data[pos:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(data[end + 2 : end + 2 + size])
        pos = end + 2 + size + 2


class Client:
    """One pool: by URL (GPUPOOL_URL, http://host:port) or by state directory's socket."""

    def __init__(
        self, state: str | Path | None = None, url: str | None = None, timeout: float = 30.0
    ) -> None:
        self.url = url if url is not None else os.environ.get("GPUPOOL_URL") or None
        self.state_dir = state_dir(str(state) if state else None)
        self.socket = socket_path(self.state_dir)
        self.timeout = timeout

    def where(self) -> str:
        return self.url or f"the state directory {self.state_dir}"

    def _connect(self) -> tuple[socket.socket, str]:
        if self.url:
            parts = urlsplit(self.url)
            host, port = parts.hostname or "127.0.0.1", parts.port or 80
            return socket.create_connection((host, port), timeout=self.timeout), f"{host}:{port}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.socket))
        except OSError:
            sock.close()
            raise
        return sock, "gpupool"

    def request_raw(
        self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        if query:
            items = {k: v for k, v in query.items() if v is not None}
            if items:
                path = f"{path}?{urlencode(items)}"
        payload = None if body is None else json.dumps(body).encode()
        try:
            sock, host = self._connect()
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonNotRunning(str(exc)) from None
        try:
            return _exchange(sock, method, path, payload, host)
        finally:
            sock.close()

    def request(
        self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None
    ) -> Any:
        status, _, data = self.request_raw(method, path, body, query)
        try:
            decoded = json.loads(data) if data else {}
        except ValueError:
            decoded = {"message": data.decode(errors="replace")}
        if status >= 400:
            if isinstance(decoded, dict):
                code = str(decoded.get("error", "error"))
                message = str(decoded.get("message") or decoded.get("detail") or decoded)
            else:
                code, message = "error", str(decoded)
            raise ApiError(status, code, message, decoded if isinstance(decoded, dict) else {})
        return decoded

    # -- the API, one method per endpoint ---------------------------------------------------
    def info(self) -> dict[str, Any]:
        return self.request("GET", "/v1/info")  # type: ignore[no-any-return]

    def submit(self, spec: dict[str, Any], user: str, token: str | None = None) -> dict[str, Any]:
        return self.request("POST", "/v1/jobs", {"spec": spec, "user": user, "token": token})  # type: ignore[no-any-return]

    def jobs(self, include_finished: bool = False, user: str | None = None) -> list[dict[str, Any]]:
        query = {"all": "true" if include_finished else None, "user": user}
        return self.request("GET", "/v1/jobs", query=query)["jobs"]  # type: ignore[no-any-return]

    def job(self, job_id: int) -> dict[str, Any]:
        return self.request("GET", f"/v1/jobs/{int(job_id)}")  # type: ignore[no-any-return]

    def cancel(self, job_id: int, user: str = "") -> dict[str, Any]:
        return self.request("POST", f"/v1/jobs/{int(job_id)}/cancel", {"user": user})  # type: ignore[no-any-return]

    def log(self, job_id: int, offset: int = 0) -> tuple[bytes, int, str]:
        status, headers, data = self.request_raw(
            "GET", f"/v1/jobs/{int(job_id)}/log", query={"offset": offset}
        )
        if status >= 400:
            body = json.loads(data) if data else {}
            raise ApiError(status, body.get("error", "error"), body.get("message", ""), body)
        return data, int(headers.get("x-offset", offset)), headers.get("x-state", "")

    def gpus(self) -> dict[str, Any]:
        return self.request("GET", "/v1/gpus")  # type: ignore[no-any-return]
