"""Which event loop the daemon serves on (daemon/serving.py, `loop_factory`)."""

from __future__ import annotations

import asyncio

import uvloop

from gpupool.daemon.serving import loop_factory


def test_the_daemon_serves_on_uvloop_when_no_listener_speaks_tls() -> None:
    loop = loop_factory(tls=False)()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_a_tls_listener_keeps_asyncios_own_loop() -> None:
    # uvloop's start_tls lost handshakes (PoolProtocol starts TLS itself): asyncio's it is.
    loop = loop_factory(tls=True)()
    try:
        assert isinstance(loop, asyncio.AbstractEventLoop)
        assert not isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
