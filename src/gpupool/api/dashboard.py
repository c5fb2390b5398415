"""The web dashboard: its files, served by the daemon at `/` without a token.

The page is static (src/gpupool/dashboard/static/: HTML, CSS and ES modules; no framework,
no build step, nothing from a CDN): it holds no data. Its scripts read the pool through the
same /v1 routes as the CLI, identified as any other client (api/identity.py: a browser on the
pool's machine is the owner of its socket; a remote one sends the token its user pasted into
the page); docs/dashboard.md says what each page shows.

The files are read once, when the app is made, and kept in memory (a few tens of KiB): each
answer is a dict lookup, with an ETag so that a browser revalidates instead of reloading.
Every answer carries a Content-Security-Policy that lets the page run only its own scripts
and talk only to its own origin: job names, commands and logs are other users' text, and a
slip that rendered one as HTML still could not run a script or send data elsewhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

# The page's scripts, styles and requests come from its own origin only; it may not be
# framed (clickjacking), and nothing may be posted elsewhere.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    # Revalidate each time (a 304 costs nothing): an upgraded daemon serves its own page.
    "Cache-Control": "no-cache",
}
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    media_type: str
    etag: str  # quoted, as the header carries it


def static_root() -> Traversable:
    """The dashboard's files inside the installed package (package-data in pyproject)."""
    return files("gpupool") / "dashboard" / "static"


def load_files(root: Traversable) -> dict[str, StaticFile]:
    """Every file of a known type under `root`, by its path relative to it ("js/main.js")."""
    found: dict[str, StaticFile] = {}
    for path, item in _walk(root, ""):
        suffix = path[path.rfind(".") :] if "." in path else ""
        media_type = MEDIA_TYPES.get(suffix)
        if media_type is None:
            continue
        body = item.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        found[path] = StaticFile(body, media_type, etag)
    return found


def _walk(folder: Traversable, prefix: str) -> Iterator[tuple[str, Traversable]]:
    for item in sorted(folder.iterdir(), key=lambda t: t.name):
        path = f"{prefix}{item.name}"
        if item.is_dir():
            yield from _walk(item, path + "/")
        elif item.is_file():
            yield path, item


def add_dashboard(app: FastAPI, root: Traversable | None = None) -> None:
    """`GET /` (the page) and `GET /dashboard/PATH` (its scripts and styles), without a
    token and outside the OpenAPI schema (they are not API)."""
    served = load_files(static_root() if root is None else root)

    def answer(request: Request, path: str) -> Response:
        found = served.get(path)
        if found is None:
            return JSONResponse(
                {"error": "not_found", "message": f"no dashboard file {path[:200]!r}"},
                status_code=404,
            )
        headers = {**PAGE_HEADERS, "ETag": found.etag}
        if request.headers.get("if-none-match") == found.etag:
            return Response(status_code=304, headers=headers)
        return Response(found.body, media_type=found.media_type, headers=headers)

    @app.get("/", include_in_schema=False)
    def page(request: Request) -> Response:
        return answer(request, "index.html")

    @app.get("/dashboard/{path:path}", include_in_schema=False)
    def dashboard_file(request: Request, path: str) -> Response:
        return answer(request, path)
