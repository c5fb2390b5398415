"""Talking to a running pool: a small HTTP client (standard library only, for a fast CLI).

Its answers are typed views (client/views.py); the GPU and pool views are in
client/pool_views.py, the project views in client/project_views.py. The views' names are
importable from here, loaded on first use (PEP 562): `gpupool submit` reads none of them,
and their module costs ~10 ms to import (frozen dataclasses, and `inspect` for them)."""

from gpupool.client.errors import (
    ApiError,
    BadClientSetting,
    ConnectionLost,
    DaemonNotRunning,
    DaemonTimeout,
    NotAGpupoolDaemon,
    PoolUnreachable,
    SpeaksTls,
    SubmitUnconfirmed,
    UnexpectedAnswer,
)
from gpupool.client.http import Client
from gpupool.client.wire_json import JsonObject, JsonValue, WireShapeError

# Not typing.TYPE_CHECKING: importing typing costs ~2 ms (mypy takes any TYPE_CHECKING as
# true, as in gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.client.views import (
        JobEvent,
        JobPage,
        JobView,
        LogChunk,
        PriorityFactors,
        Reservation,
        ResourcesView,
        Wait,
        WaitCode,
        WaitReservation,
    )

# The names of client/views.py importable from here (module docstring).
_VIEW_NAMES = frozenset(
    {
        "JobEvent",
        "JobPage",
        "JobView",
        "LogChunk",
        "PriorityFactors",
        "Reservation",
        "ResourcesView",
        "Wait",
        "WaitCode",
        "WaitReservation",
    }
)

__all__ = [
    "ApiError",
    "BadClientSetting",
    "Client",
    "ConnectionLost",
    "DaemonNotRunning",
    "DaemonTimeout",
    "NotAGpupoolDaemon",
    "PoolUnreachable",
    "SpeaksTls",
    "SubmitUnconfirmed",
    "UnexpectedAnswer",
    "JobEvent",
    "JobPage",
    "JobView",
    "JsonObject",
    "JsonValue",
    "LogChunk",
    "PriorityFactors",
    "Reservation",
    "ResourcesView",
    "Wait",
    "WaitCode",
    "WaitReservation",
    "WireShapeError",
]


def __getattr__(name: str) -> object:
    if name in _VIEW_NAMES:
        import gpupool.client.views

        return getattr(gpupool.client.views, name)
    raise AttributeError(f"module 'gpupool.client' has no attribute {name!r}")
