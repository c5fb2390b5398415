"""Talking to a running pool: a small HTTP client (standard library only, for a fast CLI)."""

from gpupool.client.errors import (
    ApiError,
    BadClientSetting,
    ConnectionLost,
    DaemonNotRunning,
    DaemonTimeout,
    NotAGpupoolDaemon,
    PoolUnreachable,
    SubmitUnconfirmed,
)
from gpupool.client.http import Client

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
]
