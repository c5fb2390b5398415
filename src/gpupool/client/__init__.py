"""Talking to a running pool: a small HTTP client (standard library only, for a fast CLI).

Its answers are typed views (client/views.py); the GPU and pool views are in
client/pool_views.py, the project views in client/project_views.py."""

from gpupool.client.errors import (
    ApiError,
    BadClientSetting,
    ConnectionLost,
    DaemonNotRunning,
    DaemonTimeout,
    NotAGpupoolDaemon,
    PoolUnreachable,
    SubmitUnconfirmed,
    UnexpectedAnswer,
)
from gpupool.client.http import Client
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
    WireJobPage,
)
from gpupool.client.wire_json import JsonObject, JsonValue, WireShapeError

__all__ = [
    "ApiError",
    "BadClientSetting",
    "Client",
    "ConnectionLost",
    "DaemonNotRunning",
    "DaemonTimeout",
    "NotAGpupoolDaemon",
    "PoolUnreachable",
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
    "WireJobPage",
    "WireShapeError",
]
