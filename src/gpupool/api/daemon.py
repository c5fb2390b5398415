"""The daemon: lock the state directory, open the store, recover jobs, serve the API.

One daemon per state directory (an flock held for the process's life, released by the kernel
even on SIGKILL). Jobs do not depend on the daemon: each runs under its own supervisor, so
the daemon may die and restart at any moment.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from gpupool.core.hardware import Inventory
from gpupool.core.paths import database_url, socket_path
from gpupool.policy.snapshot import PolicyConfig

log = logging.getLogger("gpupool.daemon")


class DaemonError(RuntimeError):
    pass


@dataclass
class DaemonConfig:
    state_dir: Path
    inventory: Inventory
    listen: str | None = None  # "HOST:PORT" for TCP, in addition to the Unix socket
    database_url: str | None = None
    poll_interval: float = 0.5
    policy: PolicyConfig = field(default_factory=PolicyConfig)


def _lock_state_dir(state: Path) -> TextIO:
    state.mkdir(parents=True, exist_ok=True)
    lock = open(state / "daemon.lock", "a+")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        pid = lock.read().strip() or "?"
        raise DaemonError(f"a gpupool daemon (pid {pid}) is already running for {state}") from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def _unix_socket(path: Path) -> socket.socket:
    # We hold the state-dir lock, so a socket file left here belongs to a dead daemon.
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    # Every local user may submit (jobs run as the daemon's user; see docs/ARCHITECTURE.md).
    os.chmod(path, 0o666)
    sock.listen(128)
    return sock


def _tcp_socket(listen: str) -> socket.socket:
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise DaemonError(f"--listen wants HOST:PORT, got {listen!r}")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, int(port)))
    except OSError as exc:
        raise DaemonError(f"cannot listen on {listen}: {exc.strerror}") from None
    sock.listen(128)
    return sock


def run_daemon(config: DaemonConfig, out: TextIO = sys.stdout) -> int:
    """Run the pool in the foreground until SIGINT/SIGTERM. Returns the exit status."""
    import uvicorn

    from gpupool.api.app import create_app
    from gpupool.engine import Engine, PoolService
    from gpupool.engine.projects import CONFIG_NAME, ConfigError, apply, load_config
    from gpupool.executor import LocalExecutor
    from gpupool.store import Store

    state = config.state_dir
    lock = _lock_state_dir(state)
    sock_path = socket_path(state)
    # gpupool.toml (projects, departments, users' defaults): a bad file refuses the start,
    # before anything is written, with every problem named (exit 2, as bad input).
    config_path = state / CONFIG_NAME
    try:
        projects_config = load_config(config_path)
    except ConfigError as exc:
        lock.close()
        print(f"gpupool: bad config file, not starting:\n{exc}", file=sys.stderr)
        return 2
    store = Store.open(config.database_url or database_url(state))
    if projects_config is not None:
        try:
            log.info("%s", apply(store, projects_config, str(config_path)))
        except ConfigError as exc:
            store.close()
            lock.close()
            print(f"gpupool: bad config file, not starting:\n{exc}", file=sys.stderr)
            return 2
    executor = LocalExecutor(state, notify_socket=sock_path)
    engine = Engine(
        store, executor, config.inventory, poll_interval=config.poll_interval, config=config.policy
    )
    service = PoolService(store, executor, engine, config.inventory)
    sockets = [_unix_socket(sock_path)]
    url = None
    if config.listen:
        sockets.append(_tcp_socket(config.listen))
        host, port = sockets[-1].getsockname()[:2]
        url = f"http://{host}:{port}"
    info = {
        "state_dir": str(state),
        "socket": str(sock_path),
        "url": url,
        "pid": os.getpid(),
        "started": time.time(),
        "inventory_source": config.inventory.source,
        "inventory_note": config.inventory.note,
        "gpus": config.inventory.total_gpus,
    }
    app = create_app(service, info)
    engine.start()
    executor.warm()

    inv = config.inventory
    models = sorted({g.model for n in inv.nodes for g in n.gpus})
    print(
        f"gpupool: pool of {inv.total_gpus} GPUs ({', '.join(models) or 'none'}) on "
        f"{len(inv.nodes)} node(s), inventory: {inv.source}",
        file=out,
    )
    if inv.note:
        print(f"gpupool: {inv.note}", file=out)
    print(f"gpupool: state in {state}", file=out)
    print(f"gpupool: API on unix socket {sock_path}", file=out)
    if url:
        print(f"gpupool: listening on {url}", file=out)
    print(
        "gpupool: submit with `gpupool submit --gpus 1 -- python train.py`; Ctrl-C stops the "
        "daemon (running jobs keep running and are re-adopted at the next start)",
        file=out,
    )
    out.flush()

    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    )

    def _stop(*_: object) -> None:
        server.should_exit = True

    signal.signal(signal.SIGTERM, _stop)
    try:
        asyncio.run(server.serve(sockets=sockets))
    finally:
        engine.stop()
        executor.close()
        store.close()
        sock_path.unlink(missing_ok=True)
        lock.close()
    return 0
