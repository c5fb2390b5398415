"""The daemon: check its input, lock the state directory, open the store, take the database
lease, recover jobs, serve the API.

Start, in this order (docs/ARCHITECTURE.md, "Starting"):
1. Check everything that can be checked without writing (daemon/preflight.py): the state
   directory, --listen, --database-url, gpupool.toml, and, in a database that exists, the
   lease of another daemon and the projects gpupool.toml refers to. Bad input is one line
   (exit 2) and leaves nothing behind.
2. Bind the TCP port (a port in use is bad input too, with nothing written yet).
3. Create the state directory and take its flock (one daemon per state directory; the
   kernel releases it even on SIGKILL), open or create the database, take its lease (one
   daemon per database: store/lease.py), apply gpupool.toml.
4. Recover jobs and serve, renewing the lease; stop scheduling and exit if it is lost.

Jobs do not depend on the daemon: each runs under its own supervisor, so the daemon may die
and restart at any moment.
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gpupool.core.hardware import Inventory
from gpupool.core.job import JobState
from gpupool.core.paths import PRIVATE_UMASK, SOCKET_MODE, database_url, socket_path
from gpupool.core.space import StorageFull, storage_full
from gpupool.core.units import format_duration, plural
from gpupool.core.wire_shapes import DaemonFacts
from gpupool.daemon.preflight import (
    BAD_INPUT,
    DaemonError,
    bind_tcp,
    check_exposure,
    check_state_dir,
    make_state_dir,
    parse_listen,
    secure_state_dir,
)
from gpupool.daemon.preflight import database_url as checked_database_url
from gpupool.daemon.serving import HttpSettings
from gpupool.executor.cgroup_plan import release as release_cgroups
from gpupool.policy.per_gpu_defaults import PerGpuDefaults
from gpupool.policy.render import per_gpu_defaults_text
from gpupool.policy.snapshot import PolicyConfig
from gpupool.store.lease import DEFAULT_TTL_S, Lease, LeaseHeld, LeaseHolder
from gpupool.store.urls import sqlite_file

if TYPE_CHECKING:
    from gpupool.api.loopback import SocketOwners
    from gpupool.core.access import Authority
    from gpupool.core.backends import Backend
    from gpupool.executor.local import LocalExecutor
    from gpupool.monitor.gpu_monitor import GpuMonitor
    from gpupool.service import PoolService
    from gpupool.spec.pool_config import BackendTable, Config
    from gpupool.store import Store

log = logging.getLogger("gpupool.daemon")

__all__ = ["BAD_INPUT", "DaemonConfig", "DaemonError", "run_daemon"]


@dataclass
class DaemonConfig:
    state_dir: Path
    inventory: Inventory
    listen: str | None = None  # "HOST:PORT" for TCP, in addition to the Unix socket
    database_url: str | None = None
    poll_interval: float = 0.5
    sample_interval_s: float = 5.0  # GPU sampling (monitor/gpu_monitor.py); 0: off
    # Board power by GPU model (the planner's catalog, cli/server.py): what the simulated
    # sampler draws power (and so energy) from on a declared inventory.
    board_power_w: Mapping[str, float] = field(default_factory=dict)
    # A job sharing a GPU above its granted memory: stopped after the grace, or only warned
    # (monitor/idle.py).
    memory_overuse_stop: bool = True
    memory_overuse_grace_s: float = 60.0
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    # Memory and CPUs per GPU of jobs that do not say (policy/per_gpu_defaults.py); off.
    per_gpu_defaults: PerGpuDefaults = field(default_factory=PerGpuDefaults)
    lease_ttl_s: float = DEFAULT_TTL_S
    http: HttpSettings = field(default_factory=HttpSettings)
    # TCP on an address other than loopback without TLS: refused unless this is set.
    insecure_listen: bool = False
    # Each job in a cgroup of its own (executor/cgroup_plan.py); False: none (`--cgroups off`).
    cgroups: bool = True
    job_pids_max: int | None = 32768  # tasks per job in its cgroup (None: unbounded)
    mps: bool = False  # fractional jobs share their GPU through NVIDIA MPS (`--mps`)


def _lock_state_dir(state: Path) -> TextIO:
    lock = open(state / "daemon.lock", "a+")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        pid = lock.read().strip() or "?"
        lock.close()
        raise DaemonError(f"a gpupool daemon (pid {pid}) is already running for {state}") from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def _gpu_monitor(
    config: DaemonConfig, service: PoolService, executor: LocalExecutor, store: Store
) -> GpuMonitor:
    """Sampling of every GPU, kept in the store and acted on (idle GPUs, memory overuse),
    started (monitor/gpu_monitor.py, service/usage_acts.py)."""
    from gpupool.monitor.gpu_monitor import GpuMonitor, PoolJobs, sampler_for  # noqa: F811
    from gpupool.monitor.idle import MemoryRule, UsageWatch
    from gpupool.monitor.nvml_sampler import NvmlSampler
    from gpupool.service.health_acts import HealthActions
    from gpupool.service.usage_acts import UsageActions

    engine = service.engine
    rule = MemoryRule(config.memory_overuse_stop, config.memory_overuse_grace_s)
    acts = UsageActions(service, UsageWatch(rule))

    jobs = PoolJobs(lambda: engine.view(fresh=False).jobs.values(), executor.main_pid)
    sampler = sampler_for(config.inventory, jobs, config.board_power_w)
    health = sampler.health_reader() if isinstance(sampler, NvmlSampler) else None
    monitor = GpuMonitor(
        sampler,
        config.sample_interval_s,
        sink=store,
        holders=jobs.holders,
        on_foreign=engine.foreign_memory,
        on_round=acts.round,
        health=health,
        on_health=HealthActions(service).events,
    )
    monitor.start()
    return monitor


def _unix_socket(path: Path) -> socket.socket:
    # We hold the state-dir lock, so a socket file left here belongs to a dead daemon.
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    # Every local user may connect: the API knows each one by its peer credentials and
    # decides what they may do (docs/security.md).
    os.chmod(path, SOCKET_MODE)
    sock.listen(128)
    return sock


def _socket_owners(config: DaemonConfig) -> SocketOwners | None:
    """Who owns a loopback TCP client's socket (api/loopback.py); None where TCP clients
    must send a token: `--no-loopback-identity`, or no /proc/net/tcp to read."""
    from gpupool.api.loopback import ProcNetOwners

    owners = ProcNetOwners()
    return owners if config.http.loopback_identity and owners.available() else None


def _tcp_identity_line(config: DaemonConfig, by_socket_owner: bool) -> str:
    """How TCP clients are known (docs/security.md, "Browsers and the dashboard")."""
    if by_socket_owner:
        return (
            "TCP clients on this machine without a token are the owner of their socket "
            "(/proc/net/tcp; --no-loopback-identity: tokens only); others need an API token"
        )
    why = "--no-loopback-identity" if not config.http.loopback_identity else "no /proc/net/tcp"
    return f"every TCP client needs an API token ({why})"


def lease_refusal(exc: LeaseHeld, url: str) -> str:
    """The one line that says who holds the database and what to do about it."""
    lease, holder = exc.lease, exc.lease.holder
    who = (
        f"the gpupool daemon pid {holder.pid} on host {holder.host} (state dir {holder.state_dir})"
    )
    if exc.running_jobs:
        stopped = (
            f"stopped {format_duration(exc.now - lease.released_at)} ago"
            if lease.released_at is not None
            else f"heartbeat {format_duration(lease.age(exc.now))} ago"
        )
        one = exc.running_jobs == 1
        count = plural(exc.running_jobs, "job")
        return (
            f"the database {url} belongs to {who}, {stopped}, and {count} "
            f"{'is' if one else 'are'} still RUNNING under it: start that daemon again (it "
            f"re-adopts {'it' if one else 'them'}); this one cannot reach "
            f"{'its supervisor' if one else 'their supervisors'}"
        )
    expires = max(lease.ttl_s - lease.age(exc.now), 0.0)
    return (
        f"the database {url} is in use by {who}, heartbeat {lease.age(exc.now):.0f}s ago: "
        f"stop that daemon first (if it died, its lease expires in {expires:.0f}s)"
    )


def _describe_start(config: DaemonConfig, sock_path: Path, url: str | None) -> list[str]:
    inv = config.inventory
    counts: dict[str, int] = {}
    for n in inv.nodes:
        for g in n.gpus:
            counts[g.model] = counts.get(g.model, 0) + 1
    models = " + ".join(f"{c}x {m}" for m, c in counts.items()) or "no GPU"
    nodes = f"1 node {inv.nodes[0].name}" if len(inv.nodes) == 1 else plural(len(inv.nodes), "node")
    where = f"API on unix socket {sock_path}" + (f", listening on {url}" if url else "")
    lines = [
        f"started (pid {os.getpid()}) on {plural(inv.total_gpus, 'GPU')} "
        f"({models}, {nodes}, {inv.source} inventory); {where}"
    ]
    if inv.note:
        lines.append(inv.note)
    limit = format_duration(config.policy.default_time_limit_s)
    lines.append(
        f"a job without --time is stopped after {limit} (--default-time-limit; a project's "
        "default_time_limit comes first)"
    )
    per_gpu = per_gpu_defaults_text(config.per_gpu_defaults, inv.nodes)
    if per_gpu is not None:
        lines.append(per_gpu)
    return lines


def _mode_line(authority: Authority) -> str:
    """'shared mode (running as root): each job runs as its owner; pool admins: ...'."""
    admins = authority.pool_admin_text()
    if authority.shared:
        return (
            f"shared mode (running as root): each job runs as the user who submitted it; "
            f"pool admins: {admins}"
        )
    return (
        f"personal mode (running as {authority.daemon_user}): only {authority.daemon_user} "
        "and root may submit or change anything; other users may read the queue"
    )


def run_daemon(config: DaemonConfig) -> int:
    """Run the pool in the foreground until SIGINT/SIGTERM, or until another daemon takes its
    database lease. Returns the exit status; DaemonError when it cannot start, or when a
    full disk stops it (one line, in the words the running daemon logs a full disk with)."""
    try:
        return _run_daemon(config)
    except Exception as exc:
        full = _storage_full(exc, config)
        if full is None:
            raise
        from gpupool.engine.log_lines import cannot_run_disk_full

        raise DaemonError(cannot_run_disk_full(full)) from None


def _storage_full(exc: BaseException, config: DaemonConfig) -> StorageFull | None:
    """The figures when `exc` is a full disk under the database or the state directory."""
    from gpupool.store.opening import StoreUnavailable

    if isinstance(exc, StoreUnavailable):
        return exc.full
    url = checked_database_url(config.database_url or database_url(config.state_dir))
    db_file = sqlite_file(url)
    in_db = storage_full(exc, None if db_file is None else db_file.parent)
    return in_db or storage_full(exc, config.state_dir)


def _run_daemon(config: DaemonConfig) -> int:
    from gpupool.spec.pool_config import CONFIG_NAME, ConfigError, read_config_text
    from gpupool.store.opening import StoreUnavailable, open_existing, open_store

    # Whatever the daemon or SQLite creates (the database, its WAL and SHM, launch.json,
    # job files) is its owner's alone; jobs get their own umask (docs/security.md).
    os.umask(PRIVATE_UMASK)
    state = config.state_dir
    sock_path = socket_path(state)
    # 1. What can be checked without writing anything.
    check_state_dir(state)
    if config.listen:
        parse_listen(config.listen)
    tls = config.http.tls
    check_exposure(
        config.listen, (str(tls.cert), str(tls.key)) if tls else None, config.insecure_listen
    )
    url = checked_database_url(config.database_url or database_url(state))
    shown_url = url.render_as_string(hide_password=True)
    config_path = state / CONFIG_NAME
    try:
        config_text = read_config_text(config_path)
    except ConfigError as exc:
        raise _bad_config(exc) from None
    holder = LeaseHolder(socket.gethostname(), str(state), os.getpid())

    with ExitStack() as stack:
        try:
            store = open_existing(url)
        except StoreUnavailable as exc:
            if exc.full is not None:
                raise
            raise DaemonError(str(exc)) from None
        if store is not None:
            stack.callback(store.close)
            _refuse_if_leased(store, holder, shown_url)
        projects_config = _checked_config(config_text, store, str(config_path))
        # 2. The port: in use is bad input, and nothing is written yet.
        tcp = bind_tcp(config.listen) if config.listen else None
        if tcp is not None:
            stack.callback(tcp.close)
        # 3. From here on the state directory is written.
        make_state_dir(state)
        lock = _lock_state_dir(state)
        stack.callback(lock.close)
        secure_state_dir(state)  # tightens one left by an older version, once
        if store is None:
            try:
                store = open_store(url)
            except StoreUnavailable as exc:
                if exc.full is not None:
                    raise
                raise DaemonError(str(exc)) from None
            stack.callback(store.close)
        try:
            lease = store.acquire_lease(holder, time.time(), config.lease_ttl_s)
        except LeaseHeld as exc:
            raise DaemonError(lease_refusal(exc, shown_url)) from None
        backends: dict[str, Backend] = {}
        if projects_config is not None and projects_config.backends:
            from gpupool.daemon.backends import open_backends

            try:  # settings checked (at step 1 too); nothing contacted (a backend that is
                # down is no error); before gpupool.toml is applied, and said to be
                backends = open_backends(
                    projects_config.backends, store.pool_id(), state, str(config_path)
                )
            except ConfigError as exc:
                store.release_lease(lease, time.time())
                raise _bad_config(exc) from None
        if projects_config is not None:
            from gpupool.service.pool_config import apply

            try:
                log.info("%s", apply(store, projects_config, str(config_path)))
            except ConfigError as exc:  # the store changed since the check: as bad input
                store.release_lease(lease, time.time())
                for backend in backends.values():
                    backend.close()
                raise _bad_config(exc) from None
        return _serve(
            config, stack, store, lease, tcp, sock_path, shown_url, projects_config, backends
        )
    raise AssertionError("unreachable")  # for mypy: the with block returns or raises


def _bad_config(exc: Exception) -> DaemonError:
    return DaemonError(f"bad config file, not starting:\n{exc}", BAD_INPUT)


def _refuse_if_leased(store: Store, holder: LeaseHolder, url: str) -> None:
    """Refuse before writing anything when the lease is not this daemon's to take (the check
    that counts is acquire_lease's, later, under the state directory's flock)."""
    try:
        store.check_lease(holder, time.time())
    except LeaseHeld as exc:
        raise DaemonError(lease_refusal(exc, url)) from None


def _checked_config(text: str | None, store: Store | None, source: str) -> Config | None:
    """The gpupool.toml Config (None: no file), checked against what the store has (a store
    that does not exist yet has only the default project); every problem at once."""
    from gpupool.core.project import DEFAULT_PROJECT, Project
    from gpupool.spec.pool_config import ConfigError, check_config

    if text is None:
        return None
    # A database that does not exist yet will hold only the default project.
    projects = [Project(DEFAULT_PROJECT)] if store is None else store.projects()
    departments = [] if store is None else store.departments()
    try:
        return check_config(text, projects, departments, source, check_backends=_backend_problems)
    except ConfigError as exc:
        raise _bad_config(exc) from None


def _backend_problems(tables: Sequence[BackendTable]) -> list[str]:
    """What opening the `[backends.NAME]` tables would refuse (api/backends.py, imported
    only for a file that has some)."""
    from gpupool.daemon.backends import backend_problems

    return backend_problems(tables)


def _serve(
    config: DaemonConfig,
    stack: ExitStack,
    store: Store,
    lease: Lease,
    tcp: socket.socket | None,
    sock_path: Path,
    shown_url: str,
    projects_config: Config | None,
    backends: Mapping[str, Backend],
) -> int:
    """Recover jobs and serve the API until stopped. Returns the exit status."""
    from gpupool.api.app import create_app
    from gpupool.api.identity import Access, pool_authority
    from gpupool.api.limits import raise_file_limit
    from gpupool.api.metrics import EngineHistograms, PoolMetrics
    from gpupool.core.clock import SystemClock
    from gpupool.core.job import Job
    from gpupool.daemon.lease_keeper import LeasedEngine, LeaseKeeper
    from gpupool.daemon.local_runs import isolation_lines, local_executor
    from gpupool.daemon.serving import (
        ListenerServer,
        guarded,
        make_servers,
        serve,
        tune_garbage_collector,
    )
    from gpupool.engine.log_lines import jobs_left_running
    from gpupool.service import PoolService
    from gpupool.service.group_commit import GroupCommit
    from gpupool.spec.pool_config import quota_warnings, where_projects_go
    from gpupool.store.submissions import NewJob

    state = config.state_dir
    servers: list[ListenerServer] = []  # the Unix socket's and TCP's, once made
    lost: list[Lease | None] = []

    def _lost(now_held: Lease | None) -> None:
        lost.append(now_held)
        if now_held is None:
            who = "another daemon"
        else:
            h = now_held.holder
            who = f"the gpupool daemon pid {h.pid} on host {h.host} (state dir {h.state_dir})"
        log.error("lost the database lease to %s: stopping scheduling and exiting", who)
        for server in servers:
            server.should_exit = True

    keeper = LeaseKeeper(store, lease, _lost)
    executor, cgroups = local_executor(
        state,
        sock_path,
        config.inventory,
        cgroups=config.cgroups,
        job_pids_max=config.job_pids_max,
        mps=config.mps,
    )
    if cgroups is not None:
        stack.callback(release_cgroups, cgroups)
    # Made before the engine and the service, which both take them (no wiring after):
    # the group commit of submissions, whose load a due pass waits for, and the engine's
    # histograms for /metrics.
    submissions: GroupCommit[NewJob, Job] = GroupCommit(store.submit_many)
    histograms = EngineHistograms()
    engine = LeasedEngine(
        store,
        executor,
        config.inventory,
        poll_interval=config.poll_interval,
        config=config.policy,
        lease=keeper,
        backends=backends,
        observer=histograms,
        arrivals=submissions,
        admission={t.name: t.admission for t in projects_config.backends}
        if projects_config
        else None,
    )
    service = PoolService(
        store,
        executor,
        engine,
        config.inventory,
        backends=backends,
        project_backends=where_projects_go(projects_config) if projects_config else None,
        submissions=submissions,
        per_gpu_defaults=config.per_gpu_defaults,
    )
    for backend in backends.values():
        stack.callback(backend.close)
    metrics = PoolMetrics(service, histograms)  # /metrics: the gauges and the histograms
    unix = _unix_socket(sock_path)
    stack.callback(sock_path.unlink, missing_ok=True)
    url = None
    if tcp is not None:
        host, port = tcp.getsockname()[:2]
        scheme = "https" if config.http.tls else "http"
        url = f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"
    info: DaemonFacts = {  # GET /v1/info's facts (core/wire_shapes.py)
        "state_dir": str(state),
        "socket": str(sock_path),
        "url": url,
        "pid": os.getpid(),
        "started": time.time(),
        "inventory_source": config.inventory.source,
        "inventory_note": config.inventory.note,
        "gpus": config.inventory.total_gpus,
    }
    authority = pool_authority(
        projects_config.pool_admins if projects_config else (),
        projects_config.project_admins if projects_config else (),
    )
    owners = _socket_owners(config) if tcp is not None else None
    access = Access(authority, store, SystemClock(), owners)
    # Connections take file descriptors: as many as this process may have, and the
    # connection caps cut to fit, TCP's well below it (api/limits.py).
    http = dataclasses.replace(config.http, limits=config.http.limits.within(raise_file_limit()))
    servers.extend(
        make_servers(
            guarded(create_app(service, info, access, metrics), http, tcp), unix, tcp, http
        )
    )
    stack.callback(executor.close)
    if config.sample_interval_s > 0:
        service.monitor = _gpu_monitor(config, service, executor, store)
        stack.callback(service.monitor.stop)
    keeper.start()
    stack.callback(keeper.stop)
    engine.start()
    stack.callback(engine.stop)
    executor.warm()

    for line in _describe_start(config, sock_path, url):
        log.info("%s", line)
    log.info("%s", _mode_line(authority))
    for line in isolation_lines(cgroups, config.mps):
        log.info("%s", line)
    if tcp is not None:
        log.info("%s", _tcp_identity_line(config, owners is not None))
    log.info("state in %s; database %s", state, shown_url)
    for warning in quota_warnings(store.projects(), config.inventory.total_gpus):
        log.warning("%s", warning)
    log.info(
        "submit with `gpupool submit --gpus 1 -- python train.py`; Ctrl-C stops the daemon "
        "(running jobs keep running and are re-adopted at the next start)"
    )

    if lost:  # lost before the servers were made
        for server in servers:
            server.should_exit = True
    try:
        tune_garbage_collector()  # everything is loaded: freeze it
        serve(servers)  # until SIGINT/SIGTERM or a lost lease
    except KeyboardInterrupt:
        pass
    finally:
        engine.stop()  # no pass may run while the lease goes
        try:
            running = sum(j.state is JobState.RUNNING for j in store.active_jobs())
            log.info("%s", jobs_left_running(running))
        except Exception as exc:  # the database is gone: say so, stop anyway
            log.warning("stopping; cannot count the running jobs: %s", exc)
    stack.close()
    log.info("stopped")
    return 1 if lost else 0
