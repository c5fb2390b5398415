"""The names core/wire_shapes.py writes its shapes with (`TypedDict`, `NotRequired`,
`Added`), and the reading of a shape at run time (`fields_of`), without importing `typing`.

Under mypy the names are typing's (the `if TYPE_CHECKING:` branch), so a shape is a TypedDict
that mypy holds its builders and readers to. At run time (the `else:` branch) they are
stand-ins: a shape is a `Shape`, its name and its keys' annotations as objects (`int`,
`str | None`, `list[JobEventWire]`, `NotRequired[X]` as a `Marked`), which `fields_of` reads
into `Kind`s for the client's checker (client/wire_json.py) and the OpenAPI document
(api/openapi.py). wire_shapes.py's docstring has the vocabulary and why.
"""

# No `from __future__ import annotations`: the stand-ins' signatures are evaluated, cheaply.
# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~3 ms (module docstring).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Annotated, TypeVar
    from typing import NotRequired as NotRequired
    from typing import TypedDict as TypedDict

    _T = TypeVar("_T")
    Added = Annotated[_T, "added"]  # required for mypy: this daemon always sends it

    class Shape:  # what mypy knows of the run-time classes below
        __name__: str
        annotations: dict[str, object]

    class Either:
        args: tuple[object, ...]

    class Marked:
        marker: str
        inner: object

else:

    class Shape:
        """A shape at run time: its name and its keys' annotations, its bases' first. Not a
        class (a class costs the CLI ~25 us to create, this a few): `class X(TypedDict)`
        calls Shape(name, bases, namespace), as a class statement calls its metaclass;
        `TypedDict("X", {key: type})` (keys that are keywords: "from", "class") is __call__."""

        __slots__ = ("__name__", "annotations")

        def __new__(cls, name, bases=(), namespace=None, **total):
            self = object.__new__(cls)
            self.__name__ = name
            self.annotations = {}
            for base in bases:
                self.annotations.update(base.annotations)
            self.annotations.update((namespace or {}).get("__annotations__", {}))
            return self

        def __init__(self, *args, **kwargs):
            pass

        def __call__(self, name, fields, total=True):
            return Shape(name, (), {"__annotations__": fields})

        def __or__(self, other):
            return Either((self, other))

        def __ror__(self, other):
            return Either((other, self))

        def __repr__(self):
            return self.__name__

    class Either:
        """`Shape | None` at run time (types.UnionType takes only classes)."""

        __slots__ = ("args",)

        def __init__(self, args):
            self.args = args

    class Marked:
        """`NotRequired[X]` or `Added[X]` at run time: the marker's name and X."""

        __slots__ = ("marker", "inner")

        def __init__(self, marker, inner):
            self.marker = marker
            self.inner = inner

    class _Marker:
        __slots__ = ("name",)

        def __init__(self, name):
            self.name = name

        def __getitem__(self, inner):
            return Marked(self.name, inner)

    NotRequired = _Marker("NotRequired")
    Added = _Marker("Added")
    TypedDict = Shape("TypedDict")


# -- reading the shapes at run time ---------------------------------------------------------

REQUIRED, OPTIONAL, ADDED = "required", "optional", "added"
# A key's type as a small tree: ("int",) ("float",) ("str",) ("bool",) ("null",) ("any",),
# ("list", T), ("map", T) (an object of T values), ("union", (T, ...)), ("shape", Shape).
Kind = tuple[object, ...]
_SCALARS: dict[object, Kind] = {
    int: ("int",),
    float: ("float",),
    str: ("str",),
    bool: ("bool",),
    None: ("null",),
    type(None): ("null",),
    object: ("any",),
}
_FIELDS: dict[int, tuple[tuple[str, Kind, str], ...]] = {}


def is_shape(value: object) -> bool:
    """Whether `value` is one of the shapes above (TypedDict itself, the root, has no keys)."""
    return isinstance(value, Shape) and bool(value.annotations)


def kind_of(annotation: object) -> Kind:
    """An annotation of a shape's key as a Kind (above); ValueError for one outside the
    vocabulary (module docstring)."""
    scalar = _SCALARS.get(annotation) if isinstance(annotation, type | None) else None
    if scalar is not None:
        return scalar
    if isinstance(annotation, Shape):
        return ("shape", annotation)
    args = getattr(annotation, "__args__", None)
    if isinstance(annotation, Either):
        args = annotation.args
    origin = getattr(annotation, "__origin__", None)
    if origin is list and args:
        return ("list", kind_of(args[0]))
    if origin is dict and args and args[0] is str:
        return ("map", kind_of(args[1]))
    if origin is None and args:  # X | Y
        return ("union", tuple(kind_of(a) for a in args))
    raise ValueError(f"not a wire type: {annotation!r}")


def fields_of(shape: object) -> tuple[tuple[str, Kind, str], ...]:
    """(key, kind, presence) of each key of `shape`, its bases' first; presence REQUIRED,
    OPTIONAL (NotRequired) or ADDED (module docstring). Cached."""
    if not isinstance(shape, Shape):
        raise TypeError(f"not a shape: {shape!r}")
    found = _FIELDS.get(id(shape))
    if found is None:
        fields = []
        for key, annotation in shape.annotations.items():
            if isinstance(annotation, Marked):
                presence = OPTIONAL if annotation.marker == "NotRequired" else ADDED
                fields.append((key, kind_of(annotation.inner), presence))
            else:
                fields.append((key, kind_of(annotation), REQUIRED))
        found = _FIELDS[id(shape)] = tuple(fields)
    return found
