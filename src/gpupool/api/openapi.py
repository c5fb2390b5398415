"""The OpenAPI document's answers: each route's response schemas and every status it can
answer, made from the wire shapes (core/wire_shapes.py) the server is typed to answer with.

How a route states what it answers:
- its success: the shape its handler returns (`-> JobWire`, `-> ProjectWire | JSONResponse`),
  read from the return annotation by `WireRoute`; a route that answers a Response it made
  itself (a pre-serialized page, raw log bytes, Prometheus text) says so with
  `responses=answered_with(...)`;
- its refusals particular to it: `responses=refusals(404, 409)`;
- the refusals every route of a kind can answer are added here (`COMMON`, `with_answers`):
  any request can be refused by the connection and body layers (408, 413, 421, 431:
  api/connections.py, api/limits.py, api/guards.py); a /v1 route by the caller lookup (401,
  and 507 when its write of a token's last use finds the disk full: api/identity.py); a
  request with a body by its content type (415, api/guards.py) and a body that cannot be
  read (400, api/checks.py); a route with parameters by their validation (422).
Every refusal is in the error shape (ErrorWire). `with_answers` rewrites the document FastAPI
makes so that each operation lists exactly these, with schemas, and puts each shape it names
(and the shapes they name) in `components/schemas`.

FastAPI still serializes a shape-annotated route's answer as it did when the annotation was
`dict[str, object]` (pydantic's serializer, no check against the shape: mypy holds the handler
to it, and tests/integration/test_api_schemathesis.py checks the answers against the document).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from fastapi.datastructures import Default, DefaultPlaceholder
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts
from starlette.routing import BaseRoute

from gpupool.api.guards import BODY_METHODS
from gpupool.api.identity import caller_of
from gpupool.core import access_shapes, ops_shapes, wire_shapes
from gpupool.core.wire_types import ADDED, REQUIRED, Kind, Shape, fields_of, is_shape

REF = "#/components/schemas/"
JSON = "application/json"
Responses = dict[int | str, dict[str, Any]]

# Refusals any request can get, before routing: the connection's read deadline (408) and head
# size (431), the body limit (413), the Host check (421).
COMMON = (408, 413, 421, 431)
# A /v1 route's caller lookup: no valid token (401); a token's last use written to a full
# disk (507).
CALLER = (401, 507)


def component_name(shape: Shape) -> str:
    """A shape's name in the document: without the module's `Wire` suffix (`Job`)."""
    return shape.__name__.removesuffix("Wire")


# The modules that define the API's answers (core/wire_shapes.py says how).
SHAPE_MODULES = (wire_shapes, access_shapes, ops_shapes)


def _shapes() -> dict[str, Shape]:
    found = {}
    for module in SHAPE_MODULES:
        for name in dir(module):
            value = getattr(module, name)
            if is_shape(value) and isinstance(value, Shape):
                found[component_name(value)] = value
    return found


SHAPES = _shapes()  # by their names in the document: what a `$ref` names


def kind_schema(kind: Kind) -> dict[str, Any]:
    """JSON Schema of a key's kind (core/wire_types.py's Kind)."""
    tag = kind[0]
    if tag == "shape":
        return ref(kind[1])
    if tag in ("list", "map"):
        inner = kind[1]
        assert isinstance(inner, tuple)
        if tag == "list":
            return {"type": "array", "items": kind_schema(inner)}
        return {"type": "object", "additionalProperties": kind_schema(inner)}
    if tag == "union":
        options = kind[1]
        assert isinstance(options, tuple)
        return {"anyOf": [kind_schema(k) for k in options if isinstance(k, tuple)]}
    simple = {
        "int": {"type": "integer"},
        "float": {"type": "number"},
        "str": {"type": "string"},
        "bool": {"type": "boolean"},
        "null": {"type": "null"},
        "any": {},
    }
    return dict(simple[str(tag)])


def shape_schema(shape: object) -> dict[str, Any]:
    """JSON Schema of a shape: its keys' schemas; required: the keys this daemon always sends
    (plain and Added); other keys allowed (a newer daemon may add some)."""
    if not isinstance(shape, Shape):
        raise TypeError(f"not a wire shape: {shape!r}")
    fields = fields_of(shape)
    schema: dict[str, Any] = {
        "type": "object",
        "title": component_name(shape),
        "properties": {key: kind_schema(kind) for key, kind, _ in fields},
    }
    required = [key for key, _, presence in fields if presence in (REQUIRED, ADDED)]
    if required:
        schema["required"] = required
    return schema


def ref(shape: object) -> dict[str, str]:
    """A `$ref` to a shape's schema (in components/schemas, by the shape's name)."""
    if not isinstance(shape, Shape):
        raise TypeError(f"not a wire shape: {shape!r}")
    return {"$ref": REF + component_name(shape)}


def answered_with(
    shape: object = None, media_type: str = JSON, schema: dict[str, Any] | None = None
) -> Responses:
    """`responses=` for a route that answers a Response it made: its success (200) as `shape`
    in JSON, or as `schema` in `media_type` (raw bytes, Prometheus text)."""
    found = ref(shape) if shape is not None else dict(schema or {})
    return {200: {"description": "OK", "content": {media_type: {"schema": found}}}}


def refusals(*statuses: int) -> Responses:
    """`responses=` for the refusals particular to a route, each in the error shape."""
    return {status: {"description": HTTPStatus(status).phrase} for status in statuses}


def returned_shapes(endpoint: Callable[..., Any]) -> tuple[object, ...]:
    """The wire shapes a handler's return annotation names (`JobWire`, `X | JSONResponse`)."""
    text = getattr(endpoint, "__annotations__", {}).get("return")
    if not isinstance(text, str):
        return ()
    try:
        value = eval(text, getattr(endpoint, "__globals__", {}))  # our own annotation's text
    except NameError:
        return ()
    options = getattr(value, "args", None) or getattr(value, "__args__", None) or (value,)
    return tuple(o for o in options if is_shape(o))


class WireRoute(APIRoute):
    """An APIRoute that knows the wire shapes its handler returns (`shapes`). FastAPI cannot
    read a shape (not a class at run time): a route left to FastAPI's default response model
    gets `dict[str, object]`, serialized as before; the document describes the shape."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[..., Any],
        *,
        response_model: Any = Default(None),
        **kwargs: Any,
    ) -> None:
        self.shapes = returned_shapes(endpoint)
        if self.shapes and isinstance(response_model, DefaultPlaceholder):
            response_model = dict[str, object]
        super().__init__(path, endpoint, response_model=response_model, **kwargs)


def _uses(route: RouteContext, dependency: Callable[..., Any]) -> bool:
    return any(d.dependency is dependency for d in route.dependencies)


def api_routes(routes: Iterable[BaseRoute]) -> list[RouteContext]:
    """Each route of the document (an included router's as it is served, its prefix and
    dependencies applied), as FastAPI's own document generator walks them."""
    found = []
    for context in iter_route_contexts(list(routes)):
        if isinstance(context.original_route, APIRoute) and context.include_in_schema:
            found.append(context)
    return found


def statuses_of(route: RouteContext, method: str) -> list[int]:
    """Every refusal `route` can answer to `method` (module docstring), in order."""
    found = set(COMMON)
    if _uses(route, caller_of):
        found.update(CALLER)
    if method in BODY_METHODS:
        found.add(415)
    if route.body_field is not None:
        found.add(400)
    if route.dependant.path_params or route.dependant.query_params or route.body_field:
        found.add(422)
    found.update(int(s) for s in route.responses if int(s) >= 400)
    return sorted(found)


def operation_answers(route: RouteContext, method: str) -> Responses:
    """The `responses` of one operation: its success with its schema, then its refusals."""
    success = route.status_code or 200
    given = route.responses.get(success) or route.responses.get(str(success)) or {}
    if "content" in given:
        content = given["content"]
    else:
        shapes = getattr(route.original_route, "shapes", ())
        if not shapes:
            raise ValueError(f"{method} {route.path}: no wire shape for its answer")
        schema = ref(shapes[0]) if len(shapes) == 1 else {"anyOf": [ref(s) for s in shapes]}
        content = {JSON: {"schema": schema}}
    answers: Responses = {
        str(success): {"description": HTTPStatus(success).phrase, "content": content}
    }
    for status in statuses_of(route, method):
        answers[str(status)] = {
            "description": HTTPStatus(status).phrase,
            "content": {JSON: {"schema": ref(wire_shapes.ErrorWire)}},
        }
    return answers


def _refs(value: object) -> Iterable[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "$ref" and isinstance(inner, str) and inner.startswith(REF):
                yield inner[len(REF) :]
            else:
                yield from _refs(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _refs(inner)


def with_answers(document: dict[str, Any], routes: Iterable[BaseRoute]) -> dict[str, Any]:
    """`document` (FastAPI's) with every operation's answers made here (module docstring),
    and the schemas of the shapes they name; FastAPI's validation-error schemas, which no
    answer has (the API answers them in the error shape), left out."""
    for route in api_routes(routes):
        for method in sorted(route.methods or ()):
            operation = document["paths"][route.path_format][method.lower()]
            operation["responses"] = operation_answers(route, method)
    components = document.setdefault("components", {})
    schemas: dict[str, Any] = {
        name: schema
        for name, schema in components.get("schemas", {}).items()
        if name not in ("HTTPValidationError", "ValidationError")
    }
    wanted = list(_refs(document["paths"]))
    while wanted:
        name = wanted.pop()
        if name in schemas:
            continue
        schemas[name] = shape_schema(SHAPES[name])
        wanted.extend(_refs(schemas[name]))
    components["schemas"] = dict(sorted(schemas.items()))
    return document


class WireApp(FastAPI):
    """The app, whose OpenAPI document (/openapi.json, /docs) is the one `with_answers` makes
    of FastAPI's: overriding `openapi` is FastAPI's documented way to change it.

    FastAPI's own OpenTelemetry (0.165 on) is off: nothing in the daemon configures a
    provider, and it asked whether one is at each request (its environment read each
    time: ~0.5% of the daemon's time under 8 SDK clients). The daemon's figures are its
    /metrics."""

    def __init__(
        self, *, title: str, version: str, docs_url: str | None, redoc_url: str | None
    ) -> None:
        if "telemetry" not in inspect.signature(FastAPI.__init__).parameters:  # before 0.165
            super().__init__(title=title, version=version, docs_url=docs_url, redoc_url=redoc_url)
            return
        super().__init__(
            title=title,
            version=version,
            docs_url=docs_url,
            redoc_url=redoc_url,
            telemetry={"tracing": False, "metrics": False, "logs": False},
        )

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:  # made once: FastAPI's, then the answers put in
            self.openapi_schema = with_answers(super().openapi(), self.routes)
        return self.openapi_schema
