"""`gpupool server install-service`: the systemd unit that runs the pool in shared mode.

The unit runs `python -m gpupool server` as root (so that each job runs as its owner,
docs/security.md) with the state directory and every other `server` flag given to
install-service, written out in the unit. Two settings matter beyond the usual:
- `KillMode=process`: jobs live under their own supervisors, which must outlive a daemon
  restart (the daemon re-adopts them); systemd's default would kill the whole cgroup.
- `UMask=0077`: the daemon's files are private from the first one (it sets 077 itself too).
- `Delegate=yes`: the unit's cgroup subtree is the daemon's to manage: each job gets a cgroup
  of its own there (executor/cgroup_plan.py), which systemd leaves alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DEFAULT_UNIT = Path("/etc/systemd/system/gpupool.service")
DEFAULT_STATE_DIR = Path("/var/lib/gpupool")
# Flags naming files: written absolute, as systemd starts the daemon from /.
_PATH_FLAGS = {"tls_cert", "tls_key", "inventory"}
# Not server flags: install-service's own, and the client's.
_NOT_PASSED = {"action", "output", "state_dir", "url", "handler", "verb", "server_parser", "user"}


def _quoted(arg: str) -> str:
    """One ExecStart word: systemd's specifiers (%) and variables ($) escaped, quoted when it
    holds anything but plain characters."""
    arg = arg.replace("%", "%%").replace("$", "$$")
    if arg and all(c.isalnum() or c in "-_./:=,+@" for c in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def server_flags(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """The `gpupool server` flags given on this command line, in the parser's order."""
    flags: list[str] = []
    for action in parser._actions:  # argparse keeps no public list of a parser's options
        dest = action.dest
        if not action.option_strings or dest in _NOT_PASSED or dest == "help":
            continue
        value = getattr(args, dest, None)
        if value is None or value == action.default:
            continue
        flag = action.option_strings[-1] if dest == "database_url" else action.option_strings[0]
        if isinstance(value, bool):
            flags.append(flag)
            continue
        for one in value if isinstance(value, list) else [value]:
            text = str(one)
            flags += [flag, os.path.abspath(text) if dest in _PATH_FLAGS else text]
    return flags


def unit_text(python: str, state_dir: Path, flags: list[str], postgres: bool) -> str:
    command = [python, "-m", "gpupool", "server", "--state-dir", str(state_dir), *flags]
    after = "network-online.target" + (" postgresql.service" if postgres else "")
    return f"""# Written by `gpupool server install-service`; docs/security.md says what it trusts.
[Unit]
Description=gpupool: a shared GPU pool (jobs run as the users who submit them)
Wants=network-online.target
After={after}

[Service]
Type=simple
ExecStart={" ".join(_quoted(word) for word in command)}
# Root, so that each job runs as its owner (shared mode).
User=root
UMask=0077
# Jobs run under their own supervisors and must outlive a daemon restart: stop the
# daemon's own process only (it re-adopts the jobs when it starts again).
KillMode=process
# The unit's cgroup subtree is the daemon's: each job runs in a cgroup of its own in it
# (its --mem and --cpus enforced there, and nothing it starts outlives it).
Delegate=yes
KillSignal=SIGTERM
TimeoutStopSec=30
Restart=on-failure
RestartSec=2
LimitNOFILE=65536
Environment=PYTHONUNBUFFERED=1

[Install]
WantedBy=multi-user.target
"""


def install(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Write the unit (to --output, `-` for stdout; /etc/systemd/system by default) and say
    how to start it."""
    from gpupool.cli.server import http_settings
    from gpupool.daemon.preflight import DaemonError, check_exposure, database_url

    try:  # what the daemon would refuse at start is refused now, before a unit is written
        http_settings(args)
        tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
        check_exposure(args.listen, tls, args.insecure_listen)
        if args.database_url:
            database_url(args.database_url)
    except (ValueError, DaemonError) as exc:
        print(f"gpupool: {exc}", file=sys.stderr)
        return 2
    state = Path(args.state_dir).resolve() if args.state_dir else DEFAULT_STATE_DIR
    url = args.database_url or ""
    text = unit_text(
        sys.executable, state, server_flags(args, parser), url.startswith("postgresql")
    )
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    target = Path(args.output) if args.output else DEFAULT_UNIT
    if args.output is None and os.geteuid() != 0:
        print(
            f"gpupool: writing {target} needs root (the unit runs the pool as root, so that "
            "jobs run as their owners): run it with sudo, or --output FILE / --output -",
            file=sys.stderr,
        )
        return 2
    try:
        target.write_text(text)
    except OSError as exc:
        print(f"gpupool: cannot write {target}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {target} (state directory {state})")
    if target.parent == DEFAULT_UNIT.parent:
        print(
            f"start it now and at boot: systemctl daemon-reload && systemctl enable --now {target.stem}"
        )
    return 0
