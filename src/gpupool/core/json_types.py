"""JSON as a type: what `json.loads` gives and `json.dumps` takes. Shared by the layers that
build or read wire JSON (spec/, client/), so a dict built by one is typed as the other reads it."""

from __future__ import annotations

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeAlias

JsonValue: TypeAlias = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]
