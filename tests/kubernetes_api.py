"""A recorded Kubernetes API server: a real HTTP server on 127.0.0.1 that answers the real
`kubernetes` client with recorded responses, and records what the client sent.

No API server can run on this machine (issue 16), so the backend's client code is exercised
against answers recorded as JSON files in tests/fixtures/kubernetes/. Their shapes are the
API's as documented (the Kubernetes API reference for batch/v1 Job and JobList, core/v1 Pod,
PodList and Service, meta/v1 Status; the Job controller's conditions and reasons in
kubernetes.io/docs/concepts/workloads/controllers/job/), and each is also read into the
client's own model by the tests (test_kubernetes_backend.py), so a fixture that no server
would send fails there. The client reaches this server through a kubeconfig, as it would a
cluster: the same code paths, HTTP and all.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from gpupool.core.json_types import JsonValue

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "kubernetes"


def fixture(name: str) -> JsonValue:
    value: JsonValue = json.loads((FIXTURES / name).read_text())
    return value


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, status: int, value: JsonValue) -> Reply:
        return cls(status, json.dumps(value).encode())

    @classmethod
    def fixture(cls, status: int, name: str) -> Reply:
        return cls(status, (FIXTURES / name).read_bytes())


@dataclass(frozen=True)
class Seen:
    """One request the client sent."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: JsonValue


def not_found(path: str) -> Reply:
    return Reply.json(
        404,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"the server could not find the requested resource ({path})",
            "reason": "NotFound",
            "code": 404,
        },
    )


@dataclass
class RecordedApiServer:
    """Routes (method, path) -> replies, given in order (the last one repeats)."""

    routes: dict[tuple[str, str], list[Reply]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, method: str, path: str, *replies: Reply) -> None:
        with self._lock:
            self.routes[(method, path)] = list(replies)

    def reply_to(self, seen: Seen) -> Reply:
        """The answer to one request (recorded already): its route's next reply. A subclass
        may answer from what was sent (tests/contract/kubernetes_play.py)."""
        return self._reply(seen.method, seen.path)

    def _reply(self, method: str, path: str) -> Reply:
        with self._lock:
            replies = self.routes.get((method, path))
            if not replies:
                return not_found(path)
            return replies.pop(0) if len(replies) > 1 else replies[0]

    def record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self.seen)

    def clear(self) -> None:
        with self._lock:
            self.seen.clear()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _handler(api: RecordedApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as an API server and urllib3's pool use

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body: JsonValue = json.loads(raw) if raw else None
            seen = Seen(self.command, parts.path, parse_qs(parts.query), body)
            api.record(seen)
            reply = api.reply_to(seen)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _serve

        def log_message(self, format: str, *args: object) -> None:
            return None

    return Handler


@contextmanager
def recorded_api_server(api: RecordedApiServer | None = None) -> Iterator[RecordedApiServer]:
    """`api` (a fresh RecordedApiServer by default) served on a free port of 127.0.0.1."""
    api = RecordedApiServer() if api is None else api
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    api.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="kube-api", daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def write_kubeconfig(path: Path, server_url: str, namespace: str = "ml") -> Path:
    """A kubeconfig whose one context, `lab`, is the server at `server_url` (plain HTTP,
    a bearer token the recorded server does not check)."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "lab", "cluster": {"server": server_url}}],
                "users": [{"name": "gpupool", "user": {"token": "recorded"}}],
                "contexts": [
                    {
                        "name": "lab",
                        "context": {"cluster": "lab", "user": "gpupool", "namespace": namespace},
                    }
                ],
                "current-context": "lab",
            }
        )
    )
    return path
