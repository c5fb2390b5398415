"""The one line a user reads when a command cannot reach its pool, and its exit code.

Exit codes (also in cli/main.py): 1 when no pool answered (none running, not a gpupool daemon,
no answer in time, an unusable state directory, an answer of a shape this client does not
know) or a submission could not be confirmed; 2 for
a client setting that cannot be used (--url, GPUPOOL_URL, GPUPOOL_TIMEOUT).
"""

from __future__ import annotations

from gpupool.client import (
    BadClientSetting,
    ConnectionLost,
    DaemonNotRunning,
    DaemonTimeout,
    NotAGpupoolDaemon,
    PoolUnreachable,
    SpeaksTls,
    SubmitUnconfirmed,
    UnexpectedAnswer,
)


def bad_setting(exc: BadClientSetting) -> str:
    return f"gpupool: {exc.setting}: {exc.problem}"


def _why(exc: PoolUnreachable) -> str:
    """What went wrong, without the `gpupool:` prefix."""
    where = exc.where
    if isinstance(exc, DaemonNotRunning):
        return (
            f"no daemon is running for {where}: start one with `gpupool server`, "
            "or point at it with --state-dir, GPUPOOL_STATE_DIR or --url"
        )
    if isinstance(exc, DaemonTimeout):
        return (
            f"the daemon at {where} did not answer in {exc.seconds:g} s "
            "(wait longer with GPUPOOL_TIMEOUT=SECONDS)"
        )
    if isinstance(exc, SpeaksTls):
        return (
            f"the daemon at {where} serves TLS: use {exc.https_url} (--url or GPUPOOL_URL; "
            "GPUPOOL_CA_CERT=FILE for a certificate of your own CA)"
        )
    if isinstance(exc, NotAGpupoolDaemon):
        if where.startswith("the state directory"):
            return f"the socket in {where[4:]} is not a gpupool daemon's ({exc.problem})"
        return f"{where} is not a gpupool daemon ({exc.problem}); check --url or GPUPOOL_URL"
    if isinstance(exc, UnexpectedAnswer):
        return (
            f"the daemon at {where} answered in a shape this client does not know "
            f"({exc.problem}): is it another version of gpupool?"
        )
    if isinstance(exc, ConnectionLost):
        return f"the daemon at {where} dropped the connection: {exc.problem}"
    if where.startswith("the state directory"):
        return f"cannot use {where}: {exc.problem}"
    return f"cannot reach the daemon at {where}: {exc.problem}"


def unreachable(exc: PoolUnreachable) -> str:
    if isinstance(exc, SubmitUnconfirmed):
        tries = f"{exc.tries} tries in {exc.elapsed_s:.0f} s"
        if not exc.maybe_stored:
            return f"gpupool: job not queued: {_why(exc.last)} ({tries})"
        return (
            f"gpupool: could not confirm the submission: {_why(exc.last)} ({tries}). "
            f"The job may have been queued: check with `gpupool queue`, or run the same "
            f"command again with --token {exc.token} (a token already used returns that "
            f"job instead of queueing a second one)"
        )
    return f"gpupool: {_why(exc)}"
