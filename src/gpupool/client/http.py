"""HTTP over the daemon's Unix socket (or TCP for remote pools), with the standard library.

httpx would cost ~130 ms of import time on every CLI call; `gpupool queue` must feel instant.
"""

from __future__ import annotations

import http.client
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


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("gpupool", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


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

    def _connection(self) -> http.client.HTTPConnection:
        if self.url:
            parts = urlsplit(self.url)
            return http.client.HTTPConnection(
                parts.hostname or "127.0.0.1", parts.port or 80, timeout=self.timeout
            )
        return _UnixConnection(str(self.socket), self.timeout)

    def request_raw(
        self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        if query:
            items = {k: v for k, v in query.items() if v is not None}
            if items:
                path = f"{path}?{urlencode(items)}"
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        conn = self._connection()
        try:
            conn.request(method, path, body=payload, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonNotRunning(str(exc)) from None
        finally:
            conn.close()

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
