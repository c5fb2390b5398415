"""What can go wrong between a client and a pool, as data: where, what, and the figures.

`PoolUnreachable` and its kinds mean no usable answer came back (the CLI exits 1);
`ApiError` is the daemon's own refusal (a 4xx/5xx with the API's error shape);
`BadClientSetting` is a URL or timeout that cannot be used (bad input: the CLI exits 2).
Each has a plain-English `str()` for SDK users; the CLI words them itself.
"""

from __future__ import annotations

from gpupool.client.wire_json import JsonObject

# Every answer of a gpupool daemon carries this header (api/app.py): an answer without it
# comes from something else listening at that address.
API_HEADER = "x-gpupool-version"


class BadClientSetting(ValueError):
    """--url, GPUPOOL_URL or GPUPOOL_TIMEOUT cannot be used."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting}: {problem}")
        self.setting = setting
        self.problem = problem


class PoolUnreachable(ConnectionError):
    """No usable answer from the pool at `where` (a URL or "the state directory X")."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"cannot reach the pool at {where}: {problem}")
        self.where = where
        self.problem = problem


class DaemonNotRunning(PoolUnreachable):
    """Nothing listens there: no socket file, or the connection was refused. Its `str()`
    says what to do, as the CLI does (cli/failures.py)."""

    def __str__(self) -> str:
        return (
            f"no daemon is running for {self.where} ({self.problem}): start one with "
            "`gpupool server`, or point at it with GPUPOOL_STATE_DIR or GPUPOOL_URL"
        )


class DaemonTimeout(PoolUnreachable):
    """Something accepted the connection but did not answer within `seconds`."""

    def __init__(self, where: str, seconds: float) -> None:
        super().__init__(where, f"no answer in {seconds:g} s")
        self.seconds = seconds


class ConnectionLost(PoolUnreachable):
    """The connection was reset or closed before a whole answer came back."""


class SpeaksTls(PoolUnreachable):
    """An http:// URL whose listener serves TLS: it closed the plain request unanswered,
    and a TLS handshake with it succeeds. `https_url` is the URL to use instead."""

    def __init__(self, where: str, https_url: str) -> None:
        super().__init__(where, f"it serves TLS: use {https_url}")
        self.https_url = https_url


class NotAGpupoolDaemon(PoolUnreachable):
    """Something answered, but not a gpupool daemon (no API header, or not HTTP at all)."""


class SubmitUnconfirmed(PoolUnreachable):
    """Every try of a submission failed. `maybe_stored`: some try reached the daemon, so the
    job may be queued; sending it again with `token` returns that job instead of a second."""

    def __init__(
        self,
        where: str,
        last: PoolUnreachable,
        tries: int,
        elapsed_s: float,
        token: str,
        maybe_stored: bool,
    ) -> None:
        super().__init__(where, last.problem)
        self.last = last
        self.tries = tries
        self.elapsed_s = elapsed_s
        self.token = token
        self.maybe_stored = maybe_stored


class UnexpectedAnswer(PoolUnreachable):
    """The daemon answered in a shape this client does not know (another gpupool version?):
    `problem` names the value and what is wrong with it (client/wire_json.py)."""


class ApiError(RuntimeError):
    """The daemon's refusal: HTTP `status`, the API's error `code` and `message`, and the
    whole error `body` (e.g. `errors`: one {field, message} per bad field)."""

    def __init__(self, status: int, code: str, message: str, body: JsonObject) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.body = body

    def field_errors(self) -> list[tuple[str, str]]:
        """(field, message) of each bad field the body lists; [] when it lists none."""
        listed = self.body.get("errors")
        out: list[tuple[str, str]] = []
        for item in listed if isinstance(listed, list) else []:
            if isinstance(item, dict):
                out.append((str(item.get("field", "")), str(item.get("message", ""))))
        return out
