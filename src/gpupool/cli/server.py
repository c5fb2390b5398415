"""`gpupool server`: run the pool in the foreground."""

from __future__ import annotations

import argparse
import sys

from gpupool.cli.commands import Offline, Parents, Subparsers


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "server", parents=[parents.common], help="run the pool (daemon) in the foreground"
    )
    p.set_defaults(handler=Offline(cmd_server))
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="also serve the JSON API over TCP, for clients on other machines "
        "(gpupool --url http://HOST:PORT ...)",
    )
    p.add_argument(
        "--gpus",
        dest="declare_gpus",
        metavar="NxMODEL",
        help="declare the GPUs instead of discovering them, e.g. 4xA100-80GB",
    )
    p.add_argument("--inventory", metavar="FILE", help="YAML description of nodes, GPUs, links")
    p.add_argument("--database-url", help="SQLAlchemy URL (default: SQLite in the state dir)")
    p.add_argument(
        "--default-time-limit",
        default="24h",
        metavar="DURATION",
        help="time limit of jobs without --time whose project sets no default_time_limit: "
        "they are stopped after it, as Slurm's DefaultTime (default 24h)",
    )
    p.add_argument(
        "--fairshare-half-life",
        default="7d",
        metavar="DURATION",
        help="half-life of past GPU usage in fair share (default 7d)",
    )
    p.add_argument("--poll-interval", type=float, default=0.5, help=argparse.SUPPRESS)
    # Seconds a database lease lasts without a heartbeat (store/lease.py); for tests.
    p.add_argument("--lease-ttl", type=float, default=None, help=argparse.SUPPRESS)


def _log_to_stderr() -> None:
    """The daemon's log on stderr: '2026-11-23 14:05:09 job 12 started on box:0,1';
    warnings and errors say so. (logging is imported here: every other verb builds this
    module's parser, and none of them logs.)"""
    import logging

    class _DaemonLogFormat(logging.Formatter):
        def __init__(self) -> None:
            super().__init__("%(asctime)s %(message)s", datefmt="%Y-%m-%d %H:%M:%S")

        def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802  (logging's)
            if record.levelno >= logging.WARNING:
                record.message = f"{record.levelname.lower()}: {record.message}"
            return super().formatMessage(record)

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_DaemonLogFormat())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # migrations only speak on trouble


def cmd_server(args: argparse.Namespace) -> int:
    from gpupool.api.daemon import DaemonConfig, DaemonError, run_daemon
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
        )
    except ValueError as exc:
        print(f"gpupool: {exc}", file=sys.stderr)
        return 2
    config = DaemonConfig(
        state_dir=state_dir(args.state_dir),
        inventory=inventory,
        listen=args.listen,
        database_url=args.database_url,
        poll_interval=args.poll_interval,
        policy=policy,
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
