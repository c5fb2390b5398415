"""`gpupool server`: run the pool in the foreground."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gpupool.cli.commands import Offline, Parents, Subparsers

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpupool.core.hardware import Inventory
    from gpupool.daemon.serving import HttpSettings
    from gpupool.policy.per_gpu_defaults import PerGpuDefaults


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "server", parents=[parents.common], help="run the pool (daemon) in the foreground"
    )
    p.set_defaults(handler=Offline(cmd_server), server_parser=p)
    p.add_argument(
        "action",
        nargs="?",
        choices=["install-service", "delegate-cgroups"],
        help="install-service: write the systemd unit that runs this pool as root with these "
        "flags (shared mode: jobs run as their owners; state in /var/lib/gpupool unless "
        "--state-dir), instead of running it; delegate-cgroups: as root, give --user's own "
        "daemon a cgroup subtree, so that its jobs get cgroups (cgroup v1 hosts)",
    )
    p.add_argument("--user", metavar="NAME", help="delegate-cgroups: whose daemon")
    p.add_argument(
        "--output",
        metavar="FILE",
        help="install-service: where to write the unit (default "
        "/etc/systemd/system/gpupool.service; - for stdout)",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="also serve the JSON API over TCP, for clients on other machines "
        "(gpupool --url http://HOST:PORT ...), and the web dashboard at http://HOST:PORT/; an "
        "address other than loopback needs --tls-cert/--tls-key or --insecure-listen",
    )
    _network_flags(p)
    p.add_argument(
        "--gpus",
        dest="declare_gpus",
        metavar="NxMODEL",
        help="declare the GPUs instead of discovering them, e.g. 4xA100-80GB",
    )
    p.add_argument("--inventory", metavar="FILE", help="YAML description of nodes, GPUs, links")
    p.add_argument(
        "--database-url",
        "--db",
        help="SQLAlchemy URL: postgresql://USER@HOST/DATABASE or sqlite:////PATH "
        "(default: SQLite in the state dir)",
    )
    p.add_argument(
        "--default-time-limit",
        default="24h",
        metavar="DURATION",
        help="time limit of jobs without --time whose project sets no default_time_limit: "
        "they are stopped after it, as Slurm's DefaultTime (default 24h)",
    )
    p.add_argument(
        "--default-mem-per-gpu",
        metavar="SIZE",
        help="memory of a job with GPUs and without --mem: SIZE per GPU (a share of a GPU "
        "counts as 1), at most what the largest node that could run it has, as Slurm's "
        "DefMemPerGPU (default: none, the job asks for no memory)",
    )
    p.add_argument(
        "--default-cpus-per-gpu",
        metavar="N",
        help="CPUs of a job with GPUs and without --cpus: N per GPU (a share of a GPU counts "
        "as 1), at most what the largest node that could run it has, as Slurm's "
        "DefCpuPerGPU (default: none, the job asks for no CPUs)",
    )
    p.add_argument(
        "--fairshare-half-life",
        default="7d",
        metavar="DURATION",
        help="half-life of past GPU usage in fair share (default 7d)",
    )
    p.add_argument(
        "--max-gpus-per-user",
        type=_positive(float),
        metavar="N",
        help="the most GPUs one user's running jobs may hold in a project that sets no cap "
        "of its own (gpupool project set --max-gpus-per-user; default: no cap)",
    )
    p.add_argument(
        "--max-jobs-per-user",
        type=_positive(int),
        metavar="N",
        help="the most running jobs one user may have in a project that sets no cap of its "
        "own (gpupool project set --max-jobs-per-user; default: no cap)",
    )
    p.add_argument(
        "--sample-interval",
        default="5s",
        metavar="DURATION",
        help="how often every GPU's utilization, memory, power and processes are sampled "
        "(NVML; simulated on a declared inventory), or 'off' (default 5s)",
    )
    p.add_argument(
        "--memory-overuse",
        choices=("stop", "warn"),
        default="stop",
        help="a job sharing a GPU that uses more GPU memory than granted: warned, then "
        "stopped after --memory-overuse-grace (stop, the default), or only warned (warn)",
    )
    p.add_argument(
        "--memory-overuse-grace",
        default="60s",
        metavar="DURATION",
        help="how long a job may stay above its granted GPU memory before it is stopped "
        "(default 60s)",
    )
    p.add_argument(
        "--cgroups",
        choices=("auto", "off"),
        default="auto",
        help="each job in a cgroup of its own, enforcing --mem and --cpus and killing all it "
        "started when it ends (auto, the default: where the host allows; the start line says "
        "what is enforced), or no cgroups (off)",
    )
    p.add_argument(
        "--mps",
        action="store_true",
        help="jobs sharing a GPU (--gpus 0.5, --gpu-memory) run as NVIDIA MPS clients of it, "
        "each pinned to its granted memory and its share of the GPU's threads: memory past "
        "the grant fails inside the job (docs/mps.md); off by default",
    )
    p.add_argument(
        "--job-pids-max",
        type=int,
        default=32768,
        metavar="N",
        help="at most N tasks (processes and threads) in one job's cgroup, which stops a fork "
        "bomb; 0: no bound (default 32768)",
    )
    p.add_argument("--poll-interval", type=float, default=0.5, help=argparse.SUPPRESS)
    # Seconds a database lease lasts without a heartbeat (store/lease.py); for tests.
    p.add_argument("--lease-ttl", type=float, default=None, help=argparse.SUPPRESS)


def _network_flags(p: argparse.ArgumentParser) -> None:
    """TCP's exposure and the limits on what one client may cost (docs/security.md)."""
    # Defaults are written out rather than imported: every verb builds this parser, and the
    # api package imports uvicorn (tests/unit/test_http_limits.py checks they agree).
    p.add_argument("--tls-cert", metavar="FILE", help="serve TCP as HTTPS with this certificate")
    p.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert")
    p.add_argument(
        "--insecure-listen",
        action="store_true",
        help="allow --listen on an address other than loopback without TLS (requests, API "
        "tokens included, cross the network in clear text)",
    )
    p.add_argument(
        "--server-name",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help="a name clients reach TCP by (the Host header), besides localhost, IP addresses "
        "and this machine's host name; repeatable. Other names are refused (421): DNS "
        "rebinding protection",
    )
    p.add_argument(
        "--no-loopback-identity",
        action="store_true",
        help="over TCP, ask every client for an API token, even from this machine (by "
        "default a client on this machine without one is the owner of its socket, as on the "
        "Unix socket: the dashboard in a local browser). For a proxy on this machine that "
        "forwards others' requests",
    )
    p.add_argument(
        "--max-body",
        metavar="SIZE",
        help="largest request body; larger ones are refused (413) unread (default 1MiB)",
    )
    p.add_argument(
        "--read-timeout",
        metavar="DURATION",
        help="a request's head and body must arrive within it, or the connection is closed "
        "(default 10s)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="open TCP connections at most; more are closed at once, and the Unix socket "
        "keeps its own share (default 256, and at most a third of the file limit)",
    )
    p.add_argument(
        "--submit-rate",
        type=float,
        metavar="PER_S",
        help="jobs a second each user may submit, after --submit-burst; more are refused "
        "with 429 and Retry-After (default 100; 0: no limit)",
    )
    p.add_argument(
        "--submit-burst",
        type=int,
        metavar="N",
        help="jobs each user may submit at once (default 10000)",
    )


def http_settings(args: argparse.Namespace) -> HttpSettings:
    """The HttpSettings the flags give; ValueError naming the flag when one is wrong."""
    from pathlib import Path

    from gpupool.api.limits import HttpLimits
    from gpupool.api.ratelimit import SubmitRate
    from gpupool.core.units import parse_duration, parse_size
    from gpupool.daemon.serving import HttpSettings, Tls

    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together: give both")
    limits, rate = HttpLimits(), SubmitRate()
    max_body, read_timeout = limits.max_body_bytes, limits.read_timeout_s
    if args.max_body is not None:
        try:
            max_body = parse_size(args.max_body)
        except ValueError as exc:
            raise ValueError(f"--max-body: {exc}") from None
        if not 1024 <= max_body <= 1 << 30:
            raise ValueError(f"--max-body: must be from 1KiB to 1GiB, got {args.max_body}")
    if args.read_timeout is not None:
        try:
            read_timeout = parse_duration(args.read_timeout)
        except ValueError as exc:
            raise ValueError(f"--read-timeout: {exc}") from None
        if not 0 < read_timeout <= 3600:
            raise ValueError(f"--read-timeout: must be from 1s to 1h, got {args.read_timeout}")
    connections = limits.max_tcp_connections
    if args.max_connections is not None:
        connections = args.max_connections
        if connections < 1:
            raise ValueError(f"--max-connections: must be at least 1, got {connections}")
    submit_rate = rate.rate if args.submit_rate is None else args.submit_rate
    burst = rate.burst if args.submit_burst is None else args.submit_burst
    if not 0 <= submit_rate <= 1e6:
        raise ValueError(f"--submit-rate: must be 0 (no limit) to 1000000, got {submit_rate:g}")
    if burst < 1:
        raise ValueError(f"--submit-burst: must be at least 1, got {burst}")
    names = tuple(n.strip() for arg in args.server_name for n in arg.split(",") if n.strip())
    tls = Tls(Path(args.tls_cert), Path(args.tls_key)) if args.tls_cert else None
    limits = HttpLimits(
        max_body_bytes=max_body,
        read_timeout_s=read_timeout,
        max_tcp_connections=connections,
    )
    return HttpSettings(
        limits,
        SubmitRate(submit_rate, burst),
        names,
        tls,
        loopback_identity=not args.no_loopback_identity,
    )


def per_gpu_defaults(args: argparse.Namespace) -> PerGpuDefaults:
    """The pool's memory and CPUs per GPU the flags give (both None unless set); ValueError
    naming the flag when one is wrong (policy/per_gpu_defaults.py)."""
    from gpupool.core.units import parse_size
    from gpupool.policy.per_gpu_defaults import PerGpuDefaults

    mem_bytes = cpus = None
    if args.default_mem_per_gpu is not None:
        try:
            mem_bytes = parse_size(args.default_mem_per_gpu)
        except ValueError as exc:
            raise ValueError(f"--default-mem-per-gpu: {exc}") from None
    if args.default_cpus_per_gpu is not None:
        try:
            cpus = int(args.default_cpus_per_gpu)
        except ValueError:
            raise ValueError(
                f"--default-cpus-per-gpu: must be a whole number of CPUs, got "
                f"{args.default_cpus_per_gpu!r}"
            ) from None
    return PerGpuDefaults(mem_bytes=mem_bytes, cpus=cpus)


def _log_to_stderr() -> None:
    """The daemon's log on stderr: '2026-11-23 14:05:09 job 12 started on box:0,1';
    warnings and errors say so. (logging is imported here: every other verb builds this
    module's parser, and none of them logs.)

    A thread of its own writes the lines: a caller only queues its record, so the API's
    event loop never waits on stderr (a pipe to journald that is slow or full, a slow
    disk), nor for the interpreter's lock after the write (docs/benchmarks.md, issue 13).
    Lines still queued when the process ends normally are written at exit; a SIGKILL can
    lose the last few milliseconds' lines, never a job (the store has it)."""
    import atexit
    import logging
    import logging.handlers
    import queue

    class _DaemonLogFormat(logging.Formatter):
        def __init__(self) -> None:
            super().__init__("%(asctime)s %(message)s", datefmt="%Y-%m-%d %H:%M:%S")

        def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802  (logging's)
            if record.levelno >= logging.WARNING:
                record.message = f"{record.levelname.lower()}: {record.message}"
            return super().formatMessage(record)

    class _Queued(logging.handlers.QueueHandler):
        def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
            # Queued as it is, formatted by the writer: the daemon's records carry ids,
            # names and figures, nothing that changes after the call. (QueueHandler's own
            # formats the message and copies the record in the caller: ~a tenth of the
            # event loop's time for a submission, docs/benchmarks.md, issue 35 goal 4.)
            return record

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_DaemonLogFormat())
    lines: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    writer = logging.handlers.QueueListener(lines, handler)
    writer.start()
    atexit.register(writer.stop)
    # The line says when and what, not where in the code, which thread or process: the
    # logging HOWTO's "Optimization" settings, so no record looks up its caller's frame.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [_Queued(lines)]
    root.setLevel(logging.INFO)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # migrations only speak on trouble


def cmd_server(args: argparse.Namespace) -> int:
    if args.action == "install-service":
        from gpupool.cli.service_unit import install

        return install(args, args.server_parser)
    if args.action == "delegate-cgroups":
        from gpupool.daemon.cgroup_delegation import delegate

        return delegate(args)
    from gpupool.daemon.run import DaemonConfig, DaemonError, run_daemon
    from gpupool.inventory import DiscoveryError, InventoryError, resolve_inventory

    try:
        inventory = resolve_inventory(gpus=args.declare_gpus, inventory_file=args.inventory)
    except InventoryError as exc:
        print(f"gpupool: bad inventory: {exc}", file=sys.stderr)
        return 2
    except DiscoveryError as exc:
        print(f"gpupool: GPU discovery failed: {exc}", file=sys.stderr)
        return 1
    from gpupool.core.paths import state_dir
    from gpupool.core.units import parse_duration
    from gpupool.policy.snapshot import PolicyConfig

    try:
        policy = PolicyConfig(
            default_time_limit_s=parse_duration(args.default_time_limit),
            fairshare_half_life_s=parse_duration(args.fairshare_half_life),
            max_gpus_per_user=args.max_gpus_per_user,
            max_running_jobs_per_user=args.max_jobs_per_user,
        )
        off = args.sample_interval.strip().lower() == "off"
        sample_interval_s = 0.0 if off else parse_duration(args.sample_interval)
        memory_grace_s = parse_duration(args.memory_overuse_grace)
        http = http_settings(args)
        per_gpu = per_gpu_defaults(args)
    except ValueError as exc:
        print(f"gpupool: {exc}", file=sys.stderr)
        return 2
    config = DaemonConfig(
        state_dir=state_dir(args.state_dir),
        inventory=inventory,
        listen=args.listen,
        database_url=args.database_url,
        poll_interval=args.poll_interval,
        sample_interval_s=sample_interval_s,
        policy=policy,
        http=http,
        insecure_listen=args.insecure_listen,
        board_power_w=_board_power(inventory),
        memory_overuse_stop=args.memory_overuse == "stop",
        memory_overuse_grace_s=memory_grace_s,
        per_gpu_defaults=per_gpu,
        cgroups=args.cgroups == "auto",
        mps=args.mps,
        job_pids_max=args.job_pids_max if args.job_pids_max > 0 else None,
    )
    if args.lease_ttl is not None:
        config.lease_ttl_s = args.lease_ttl
    # Refusals to start are one line on stderr (below); once it runs, the daemon logs there.
    _log_to_stderr()
    try:
        return run_daemon(config)
    except DaemonError as exc:
        print(f"gpupool: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 0


def _board_power(inventory: Inventory) -> dict[str, float]:
    """Each declared GPU model's board power from the planner's catalog (a datasheet's TDP),
    for the simulated sampler; models the catalog does not know draw nothing (no energy)."""
    if inventory.source == "nvml":
        return {}  # NVML reports the real draw
    from gpupool.plan.catalog import load_catalog
    from gpupool.plan.quantity import PlanError

    catalog = load_catalog()
    out = {}
    for model in {g.model for n in inventory.nodes for g in n.gpus}:
        try:
            out[model] = catalog.gpu(model).tdp_w
        except PlanError:
            pass
    return out


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    """argparse type: a number of `kind` above 0, else a usage error naming it."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {kind.__name__}: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text!r}")
        return value

    return parse
