"""`gpupool token create|list|revoke` (API tokens for TCP) and `gpupool audit`.

A token is shown once, when it is made; the pool keeps only its salted hash. Over TCP these
commands need a token themselves (docs/security.md).
"""

from __future__ import annotations

import argparse
import sys
import time

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.render import print_json, print_table
from gpupool.client import Client

TOKEN_COLUMNS = ("ID", "NAME", "USER", "CREATED", "LAST USED", "EXPIRES")
AUDIT_COLUMNS = ("TIME", "WHO", "VIA", "ACTION", "TARGET", "DETAIL")
DEFAULT_EXPIRES = "90d"


def register(sub: Subparsers, parents: Parents) -> None:
    common, listing = parents.common, parents.listing
    p = sub.add_parser(
        "token",
        parents=[common],
        help="API tokens for talking to the pool over TCP",
        description="API tokens: what a client sends over TCP (GPUPOOL_TOKEN or "
        "~/.config/gpupool/token, mode 0600). Shown once when created; the pool keeps only a "
        "salted hash.",
    )
    verbs = p.add_subparsers(dest="token_verb", metavar="ACTION")
    verbs.required = True
    c = verbs.add_parser("create", parents=[common], help="create a token (printed once)")
    c.set_defaults(handler=OnPool(cmd_create))
    c.add_argument("--name", help="a name to tell it apart (default: default)")
    c.add_argument("--user", help="for this user (pool admins only)")
    c.add_argument(
        "--expires",
        default=DEFAULT_EXPIRES,
        metavar="DURATION",
        help=f"valid for this long, e.g. 30d, 12h, or never (default {DEFAULT_EXPIRES})",
    )
    ls = verbs.add_parser(
        "list", aliases=["ls"], parents=[common, listing], help="your tokens (admins: all)"
    )
    ls.set_defaults(handler=OnPool(cmd_list))
    r = verbs.add_parser("revoke", parents=[common], help="revoke a token by its id")
    r.set_defaults(handler=OnPool(cmd_revoke))
    r.add_argument("token_id", type=_token_id, metavar="ID")

    a = sub.add_parser(
        "audit",
        parents=[common, listing],
        help="the audit log: admin actions and cancels by others (pool admins)",
    )
    a.set_defaults(handler=OnPool(cmd_audit))
    a.add_argument(
        "--since", default="7d", metavar="DURATION", help="how far back (default 7d; e.g. 12h)"
    )


def _token_id(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 2**63:
        raise argparse.ArgumentTypeError(f"not a token id: {text!r} (see gpupool token list)")
    return int(text)


def _duration(flag: str, text: str) -> float:
    from gpupool.core.units import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise _BadFlag(f"{flag}: {exc}") from None


class _BadFlag(ValueError):
    pass


def _when(ts: float | None, never: str = "-") -> str:
    if ts is None:
        return never
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def cmd_create(client: Client, args: argparse.Namespace) -> int:
    try:
        expires = None if args.expires == "never" else _duration("--expires", args.expires)
    except _BadFlag as exc:
        print(f"gpupool: {exc}", file=sys.stderr)
        return 2
    made = client.create_token(args.name, args.user, expires)
    print(made.token)
    t = made.record
    print(
        f"token {t.id} ({t.name}) for {t.user}, expires {_when(t.expires_at, 'never')}. It is "
        "shown only now: keep it in $GPUPOOL_TOKEN or ~/.config/gpupool/token (chmod 600).",
        file=sys.stderr,
    )
    return 0


def cmd_list(client: Client, args: argparse.Namespace) -> int:
    found = client.tokens()
    if args.json:
        print_json(found.wire)
        return 0
    if not found.tokens:
        print("No API tokens (create one with gpupool token create).")
        return 0
    rows = [
        (
            t.id,
            t.name,
            t.user,
            _when(t.created_at),
            _when(t.last_used_at, "never"),
            _when(t.expires_at, "never"),
        )
        for t in found.tokens
    ]
    print_table(TOKEN_COLUMNS, rows, limits={"NAME": 32, "USER": 16})
    return 0


def cmd_revoke(client: Client, args: argparse.Namespace) -> int:
    t = client.revoke_token(args.token_id)
    print(f"Revoked token {t.id} ({t.name}) of {t.user}")
    return 0


def cmd_audit(client: Client, args: argparse.Namespace) -> int:
    try:
        since = time.time() - _duration("--since", args.since)
    except _BadFlag as exc:
        print(f"gpupool: {exc}", file=sys.stderr)
        return 2
    log = client.audit(since)
    if args.json:
        print_json(log.wire)
        return 0
    if not log.entries:
        print(f"Nothing in the audit log for the last {args.since}.")
        return 0
    rows = [(_when(e.time), e.actor, e.via, e.action, e.target, e.detail) for e in log.entries]
    print_table(AUDIT_COLUMNS, rows, limits={"WHO": 16, "TARGET": 32, "DETAIL": 60})
    return 0
