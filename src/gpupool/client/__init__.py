"""Talking to a running pool: a small HTTP client (standard library only, for a fast CLI)."""

from gpupool.client.http import ApiError, Client, DaemonNotRunning

__all__ = ["ApiError", "Client", "DaemonNotRunning"]
