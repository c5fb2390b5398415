"""What `shell` and `notebook` add to a refusal of their session: the flags of the command
the user typed (issue 30, item 2).

In a pool with quotas an interactive session is not preemptible and runs within its
project's quota, as Run:ai runs interactive work; with `--preemptible` it may borrow idle GPUs
above it until their owner takes them back: a shell then ends, a notebook is requeued
(docs/scheduling.md). The daemon's
refusal (`quota_never_fits`) names `--preemptible` and a project with quota in general
terms; here they become a command line the user can run as it is.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpupool.client import Client, JobView
    from gpupool.client.errors import ApiError
    from gpupool.client.wire_json import JsonObject

QUOTA_NEVER_FITS = "quota_never_fits"  # the API's error code (service/pool_service.py)


def add_preemptible_flag(parser: argparse.ArgumentParser, when_preempted: str) -> None:
    """`--preemptible`, its help saying what becomes of the session when it is preempted."""
    parser.add_argument(
        "--preemptible",
        action="store_true",
        default=None,
        help="may borrow idle GPUs above the project's quota; when their owner takes them "
        f"back, {when_preempted} (default: not preemptible, within quota only)",
    )


def refusal_advice(exc: ApiError, command: str) -> str | None:
    """The line to print after the daemon's refusal of a `command` session; None: no more
    to say than the daemon did."""
    if exc.code != QUOTA_NEVER_FITS:
        return None
    return (
        f"gpupool: to borrow idle GPUs above the quota: gpupool {command} --preemptible ...; "
        f"or run it within a project's quota: gpupool {command} --project NAME ... "
        "(`gpupool project list` shows them)"
    )


def submit_session(client: Client, wire: JsonObject, command: str) -> JobView | None:
    """Queue a `command` session (a fresh token: a try cut off is stored once); None after
    printing the daemon's quota refusal with the command lines that would be taken. Any
    other error is the CLI's to word, as usual."""
    import uuid

    from gpupool.client.errors import ApiError

    try:
        return client.submit(wire, token=uuid.uuid4().hex)
    except ApiError as exc:
        if said_refusal(exc, command):
            return None
        raise


def said_refusal(exc: ApiError, command: str) -> bool:
    """Print the daemon's refusal of a `command` session and the command lines that would be
    taken; False (nothing printed) for any other error, which the CLI words as usual."""
    advice = refusal_advice(exc, command)
    if advice is None:
        return False
    from gpupool.cli.render import shown_lines  # the daemon's words may quote user input

    print(f"gpupool: job refused: {shown_lines(exc.message)}\n{advice}", file=sys.stderr)
    return True
