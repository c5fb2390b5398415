"""HTTP over the daemon's Unix socket (or TCP for remote pools), with the standard library.

httpx would cost ~130 ms and http.client ~20 ms of import time on every CLI call;
`gpupool queue` must feel instant.

Every way of not reaching a pool is a typed exception (`PoolUnreachable` and its kinds), with
the figures a caller needs to say what happened in one line; the CLI renders them.
"""

from __future__ import annotations

import _socket
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence

from gpupool.client.errors import (
    API_HEADER,
    ConnectionLost,
    DaemonNotRunning,
    DaemonTimeout,
    NotAGpupoolDaemon,
    PoolUnreachable,
    SubmitUnconfirmed,
    UnexpectedAnswer,
)
from gpupool.client.kept_connections import KeptConnections, exchange_on
from gpupool.client.transport import (
    api_error,
    decode,
    query_string,
    quoted,
    tcp_address,
    timeout_from_env,
    tls_context,
    tls_instead,
)
from gpupool.client.wire_json import JsonObject, JsonValue, WireShapeError
from gpupool.core.state_location import socket_text, state_dir_text

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:  # imported by the methods that read them (client/views.py says why)
    from _socket import socket as Socket
    from pathlib import Path
    from typing import TypeVar

    T = TypeVar("T")

    from gpupool.client.access_views import AuditLog, Identity, NewToken, TokenList, TokenView
    from gpupool.client.job_lines import JobLinesPage
    from gpupool.client.pool_views import BackendsView, GpusView, PoolInfo
    from gpupool.client.project_views import DefaultProject, ProjectList, ProjectView
    from gpupool.client.receipts import SubmitReceipt
    from gpupool.client.usage_views import JobUsageView, UsageReportView
    from gpupool.client.views import JobPage, JobView, LogChunk
    from gpupool.core.benchmarks import SavedBenchmark


# A submission cut off in flight is sent again with the same token (the store keeps one job
# per token): up to SUBMIT_TRIES tries, waiting SUBMIT_BACKOFF_S between tries that failed at
# once (reset, refused while the daemon restarts), and starting no try after the retry window.
SUBMIT_TRIES = 5
SUBMIT_BACKOFF_S = (0.5, 1.0, 2.0, 4.0)
SUBMIT_RETRY_WINDOW_S = 30.0


class Client:
    """One pool: by URL (GPUPOOL_URL, http://host:port) or by state directory's socket.

    `timeout` (seconds; default $GPUPOOL_TIMEOUT or 30) bounds the wait for each answer.
    Over TCP every request carries an API token (`token`, else $GPUPOOL_TOKEN, else the token
    file, client/credentials.py); over the Unix socket none: the kernel names the caller.
    An https:// URL checks the daemon's certificate against `ca_file` (default
    $GPUPOOL_CA_CERT; else the system's CAs). Raises BadClientSetting for a URL, timeout,
    token file or CA file that cannot be used."""

    def __init__(
        self,
        state: str | Path | None = None,
        url: str | None = None,
        timeout: float | None = None,
        token: str | None = None,
        ca_file: str | None = None,
    ) -> None:
        source = "--url" if url is not None else "GPUPOOL_URL"
        self.url = url if url is not None else os.environ.get("GPUPOOL_URL") or None
        found = tcp_address(self.url, source) if self.url else None
        self.address = found[:2] if found else None
        self.tls = (
            tls_context(ca_file or os.environ.get("GPUPOOL_CA_CERT") or None)
            if found and found[2]
            else None
        )
        # Kept as text: pathlib costs every CLI command ~2.5 ms (core/state_location.py).
        self._state_dir = state_dir_text(os.fspath(state) if state else None)
        self._socket = socket_text(self._state_dir)
        self.timeout = timeout_from_env() if timeout is None else timeout
        self.token: str | None = None
        self._kept = KeptConnections()
        if self.address is not None:
            from gpupool.client.credentials import find_token

            self.token = token if token is not None else find_token()

    @property
    def state_dir(self) -> Path:
        """The pool's state directory (the one given, else found as core/paths.py finds it)."""
        from pathlib import Path

        return Path(self._state_dir)

    @property
    def socket(self) -> Path:
        """The daemon's Unix socket in the state directory."""
        from pathlib import Path

        return Path(self._socket)

    def where(self) -> str:
        return self.url or f"the state directory {self._state_dir}"

    def _connect(self) -> tuple[Socket, str]:
        """A connected socket; DaemonNotRunning if nothing listens, PoolUnreachable if the
        address cannot be used, DaemonTimeout if the connection is not accepted in time."""
        try:
            if self.address:
                import socket  # only over TCP: its enums and selectors cost ~2 ms

                host, port = self.address
                sock = socket.create_connection((host, port), timeout=self.timeout)
                if self.tls is not None:
                    try:
                        sock = self.tls.wrap_socket(sock, server_hostname=host)
                    except BaseException:
                        sock.close()
                        raise
                return sock, f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            unix = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            unix.settimeout(self.timeout)
            try:
                unix.connect(self._socket)
            except BaseException:
                unix.close()
                raise
            return unix, "gpupool"
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonNotRunning(self.where(), exc.strerror or str(exc)) from None
        except TimeoutError:
            raise DaemonTimeout(self.where(), self.timeout) from None
        except _socket.gaierror as exc:
            raise PoolUnreachable(self.where(), f"unknown host ({exc.strerror})") from None
        except OSError as exc:  # ssl.SSLError is one: a certificate that does not check out
            raise PoolUnreachable(self.where(), _os_problem(exc, self)) from None

    def request_raw(
        self,
        method: str,
        path: str,
        body: JsonValue = None,
        query: Mapping[str, str | int | None] | None = None,
        *,
        replayable: bool = False,
    ) -> tuple[int, dict[str, str], bytes]:
        """The answer's status, headers and body. On a connection kept from an earlier
        answer when there is one (client/kept_connections.py); `replayable`: sending the
        request twice is harmless (a GET always is)."""
        if query:
            items = {k: v for k, v in query.items() if v is not None}
            if items:
                path = f"{path}?{query_string(items)}"
        payload = None if body is None else json.dumps(body).encode()
        try:
            sock, host, answer = exchange_on(
                self._kept, self._connect, method, path, payload, self.token, replayable
            )
        except PoolUnreachable as exc:  # an OSError too: before the clauses below
            if exc.where:  # from connecting (DaemonNotRunning, DaemonTimeout, ...)
                raise
            # From the exchange (ConnectionLost, NotAGpupoolDaemon): SpeaksTls if it is TLS's.
            lost: PoolUnreachable = type(exc)(self.where(), exc.problem)
            raise tls_instead(lost, self.url, self.address, self.tls is None) from None
        except TimeoutError:
            raise DaemonTimeout(self.where(), self.timeout) from None
        except OSError as exc:  # reset, broken pipe
            raise ConnectionLost(self.where(), exc.strerror or type(exc).__name__) from None
        status, headers, data, reusable = answer
        if API_HEADER not in headers:
            sock.close()
            kind = headers.get("content-type", "no content type").split(";")[0]
            raise NotAGpupoolDaemon(self.where(), f"it answered HTTP {status}, {kind}")
        if reusable:
            self._kept.keep(sock, host)
        else:
            sock.close()
        return status, headers, data

    def close(self) -> None:
        """Close the connections kept for the next requests (they close with the process
        too, or after a few idle seconds at the daemon's end)."""
        self._kept.close()

    def request(
        self,
        method: str,
        path: str,
        body: JsonValue = None,
        query: Mapping[str, str | int | None] | None = None,
        *,
        replayable: bool = False,
    ) -> JsonValue:
        """The decoded JSON answer; ApiError when the daemon refuses the request."""
        status, _, data = self.request_raw(method, path, body, query, replayable=replayable)
        decoded = decode(data)
        if status >= 400:
            raise api_error(status, decoded)
        return decoded

    def _read(self, read: Callable[[JsonValue], T], answer: JsonValue) -> T:
        """`answer` read as a view; UnexpectedAnswer when its shape is not the one known."""
        try:
            return read(answer)
        except WireShapeError as exc:
            raise UnexpectedAnswer(self.where(), str(exc)) from None

    # -- the API, one method per endpoint ---------------------------------------------------
    def info(self) -> PoolInfo:
        from gpupool.client.pool_views import read_info

        return self._read(read_info, self.request("GET", "/v1/info"))

    def whoami(self) -> Identity:
        """Who the pool takes this client to be (its user name, and how it knows)."""
        from gpupool.client.access_views import read_identity

        return self._read(read_identity, self.request("GET", "/v1/whoami"))

    def submit(self, spec: JsonObject, token: str | None = None, retry: bool = True) -> JobView:
        """Queue a job, as whoever the pool takes this client to be (the kernel's peer over
        the Unix socket, the API token's user over TCP). With a token (and `retry`), a try
        cut off in flight (connection reset or lost, no answer in time, refused while the
        daemon restarts) is sent again with the same token, which the daemon stores at most
        once. SubmitUnconfirmed when every try failed, saying whether the job may have been
        stored."""
        from gpupool.client.views import read_job

        return self._read(read_job, self._submit({"spec": spec, "token": token}, token, retry))

    def submit_receipt(
        self, spec: JsonObject, token: str | None = None, retry: bool = True
    ) -> SubmitReceipt:
        """As `submit`, the answer read for what `gpupool submit` prints only (its id and
        project): the CLI's path, which then needs no view of a job (client/views.py)."""
        from gpupool.client.receipts import read_receipt

        body: JsonObject = {"spec": spec, "token": token}
        return self._read(read_receipt, self._submit(body, token, retry))

    def submit_batch(
        self,
        specs: Sequence[JsonObject],
        token: str | None = None,
        retry: bool = True,
        base_env: Mapping[str, str] | None = None,
        common: JsonObject | None = None,
    ) -> list[int]:
        """Queue every job of `specs` or none (POST /v1/jobs/batch, at most 1,000), with
        `base_env` for each spec without one and `common`, what every spec shares
        (sdk/batch_shared.py); their ids, in order. Tried again with the batch's token as
        `submit` is."""
        body: JsonObject = {"specs": list(specs), "token": token}
        if base_env is not None:
            body["base_env"] = dict(base_env)
        if common is not None:
            body["common"] = common
        from gpupool.client.receipts import read_batch_ids

        return self._read(read_batch_ids, self._submit(body, token, retry, "/v1/jobs/batch"))

    def _submit(
        self, body: JsonObject, token: str | None, retry: bool, path: str = "/v1/jobs"
    ) -> JsonValue:
        """POST `body` (holding `token`) to a submit `path`, tried again as `submit` says;
        the daemon's answer."""
        if token is None or not retry:
            return self.request("POST", path, body, replayable=token is not None)
        first = time.monotonic()
        window = max(SUBMIT_RETRY_WINDOW_S, 2 * self.timeout)
        reached = False  # did any try get as far as sending the request?
        tries = 0
        while True:
            tries += 1
            try:
                return self.request("POST", path, body, replayable=True)
            except DaemonNotRunning as exc:
                if not reached:
                    raise  # nothing was ever sent: the job is surely not stored
                last: PoolUnreachable = exc
                delay = SUBMIT_BACKOFF_S[min(tries, len(SUBMIT_BACKOFF_S)) - 1]
            except DaemonTimeout as exc:
                reached, last, delay = True, exc, 0.0  # the wait was the timeout itself
            except ConnectionLost as exc:
                reached, last = True, exc
                delay = SUBMIT_BACKOFF_S[min(tries, len(SUBMIT_BACKOFF_S)) - 1]
            elapsed = time.monotonic() - first
            if tries >= SUBMIT_TRIES or elapsed + delay >= window:
                raise SubmitUnconfirmed(self.where(), last, tries, elapsed, token, reached)
            time.sleep(delay)

    def jobs(self, include_finished: bool = False, user: str | None = None) -> tuple[JobView, ...]:
        """Every active job (`include_finished`: every job), of `user` when given, by id."""
        return self.job_page(include_finished, user).jobs

    def job_page(
        self,
        include_finished: bool = False,
        user: str | None = None,
        *,
        project: str | None = None,
        states: Sequence[str] | None = None,
        limit: int | None = None,
        offset: int = 0,
        order: str = "id",
        since: float | None = None,
        ids: Sequence[int] | None = None,
    ) -> JobPage:
        """A page of jobs, with the `total` and the `counts` (by state) of every match;
        `order` "queue": running, then pending in queue order; `since`: submitted then
        (epoch seconds) or later; `ids`: only these jobs (1 to core.batch.MAX_IDS_PER_LIST
        of them)."""
        query = _page_query(
            include_finished, user, project, states, limit, offset, order, since, ids
        )
        from gpupool.client.views import read_job_page

        return self._read(read_job_page, self.request("GET", "/v1/jobs", query=query))

    def job_page_lines(
        self,
        include_finished: bool = False,
        user: str | None = None,
        *,
        project: str | None = None,
        states: Sequence[str] | None = None,
        limit: int | None = None,
        order: str = "id",
        since: float | None = None,
        ids: Sequence[int] | None = None,
    ) -> JobLinesPage:
        """job_page's jobs as the daemon's JSON lines, unparsed (`queue --json`)."""
        query = _page_query(include_finished, user, project, states, limit, 0, order, since, ids)
        query["format"] = "lines"
        from gpupool.client.job_lines import read_job_lines

        status, headers, data = self.request_raw("GET", "/v1/jobs", query=query)
        if status >= 400:
            raise api_error(status, decode(data))
        try:
            return read_job_lines(data, headers.get("content-type", ""))
        except WireShapeError as exc:
            raise UnexpectedAnswer(self.where(), str(exc)) from None

    def job(self, job_id: int) -> JobView:
        from gpupool.client.views import read_job

        return self._read(read_job, self.request("GET", f"/v1/jobs/{int(job_id)}"))

    def cancel(self, job_id: int) -> JobView:
        from gpupool.client.views import read_job

        answer = self.request("POST", f"/v1/jobs/{int(job_id)}/cancel", {})
        return self._read(read_job, answer)

    def log(
        self,
        job_id: int,
        offset: int = 0,
        rank: int | None = None,
        tail: int | None = None,
        stderr: bool = False,
    ) -> LogChunk:
        """The job's output from `offset` on (raw bytes: logs need not be UTF-8); with
        `rank`, that rank's alone (a distributed job's; docs/distributed.md); with `stderr`,
        its stderr kept apart (--separate-stderr); with `tail`, from where its last `tail`
        lines start instead."""
        query: dict[str, str | int | None] = {"offset": offset, "rank": rank, "tail": tail}
        if stderr:  # None values are left out
            query["stderr"] = "true"
        from gpupool.client.views import LogChunk
        from gpupool.core.job_enums import JobState

        status, headers, data = self.request_raw("GET", f"/v1/jobs/{int(job_id)}/log", query=query)
        if status >= 400:
            raise api_error(status, decode(data))
        text = headers.get("x-state", "")
        try:
            state = JobState(text) if text else None
        except ValueError:
            raise UnexpectedAnswer(self.where(), f"X-State: not a job state: {text!r}") from None
        return LogChunk(data, int(headers.get("x-offset", offset)), state)

    def gpus(self) -> GpusView:
        from gpupool.client.pool_views import read_gpus

        return self._read(read_gpus, self.request("GET", "/v1/gpus"))

    def backends(self) -> BackendsView:
        """The local pool and the pool's backends, with their health (docs/backends.md)."""
        from gpupool.client.pool_views import read_backends

        return self._read(read_backends, self.request("GET", "/v1/backends"))

    # -- accounting --------------------------------------------------------------------------
    def usage(self, by: str = "user", since: str = "30d") -> UsageReportView:
        """Per user, project or gpu-type over the last `since` (a duration: 30d, 12h)."""
        from gpupool.client.usage_views import read_usage_report

        answer = self.request("GET", "/v1/usage", query={"by": by, "since": since})
        return self._read(read_usage_report, answer)

    def job_usage(self, job_id: int) -> JobUsageView | None:
        """A job's GPU use so far; None before its first sample (or with sampling off)."""
        from gpupool.client.usage_views import read_job_usage

        return self._read(read_job_usage, self.request("GET", f"/v1/jobs/{int(job_id)}/usage"))

    # -- benchmark results (docs/hwbench.md) ------------------------------------------------
    def save_benchmark(self, result: JsonObject) -> SavedBenchmark:
        """Keep a benchmark result (`BenchResult.to_json()`) in the pool, under your name."""
        from gpupool.client.bench_views import read_saved_benchmark

        return self._read(read_saved_benchmark, self.request("POST", "/v1/benchmarks", result))

    def benchmark_results(
        self, benchmark: str | None = None, gpu_model: str | None = None, limit: int = 50
    ) -> tuple[SavedBenchmark, ...]:
        """Saved results, newest first: of `benchmark`, on GPUs `gpu_model` names."""
        from gpupool.client.bench_views import read_saved_benchmarks

        query: dict[str, str | int | None] = {
            "benchmark": benchmark,
            "gpu_model": gpu_model,
            "limit": limit,
        }
        answer = self.request("GET", "/v1/benchmarks", query=query)
        return self._read(read_saved_benchmarks, answer)

    def benchmark_result(self, result_id: int) -> SavedBenchmark:
        from gpupool.client.bench_views import read_saved_benchmark

        answer = self.request("GET", f"/v1/benchmarks/{int(result_id)}")
        return self._read(read_saved_benchmark, answer)

    # -- projects ----------------------------------------------------------------------------
    def projects(self) -> ProjectList:
        from gpupool.client.project_views import read_project_list

        return self._read(read_project_list, self.request("GET", "/v1/projects"))

    def project(self, name: str) -> ProjectView:
        from gpupool.client.project_views import read_project

        return self._read(read_project, self.request("GET", _project_path(name)))

    def create_project(self, name: str, fields: JsonObject) -> ProjectView:
        from gpupool.client.project_views import read_project

        body: JsonObject = {"name": name, **fields}
        return self._read(read_project, self.request("POST", "/v1/projects", body))

    def update_project(self, name: str, changes: JsonObject) -> ProjectView:
        from gpupool.client.project_views import read_project

        return self._read(read_project, self.request("PATCH", _project_path(name), changes))

    def delete_project(self, name: str) -> None:
        self.request("DELETE", _project_path(name))

    def default_project(self, user: str) -> DefaultProject:
        from gpupool.client.project_views import read_default_project

        answer = self.request("GET", _default_path(user))
        return self._read(read_default_project, answer)

    def set_default_project(self, user: str, project: str | None) -> DefaultProject:
        from gpupool.client.project_views import read_default_project

        answer = self.request("PUT", _default_path(user), {"project": project})
        return self._read(read_default_project, answer)

    # -- API tokens and the audit log -------------------------------------------------------
    def create_token(
        self, name: str | None = None, user: str | None = None, expires_s: float | None = None
    ) -> NewToken:
        """A new API token (for `user`: pool admins only), valid `expires_s` seconds (None:
        until revoked). Its text is in this answer only."""
        from gpupool.client.access_views import read_new_token

        body: JsonObject = {"expires_s": expires_s}
        if name is not None:
            body["name"] = name
        if user is not None:
            body["user"] = user
        return self._read(read_new_token, self.request("POST", "/v1/tokens", body))

    def tokens(self) -> TokenList:
        """Your tokens (a pool admin's: everyone's)."""
        from gpupool.client.access_views import read_token_list

        return self._read(read_token_list, self.request("GET", "/v1/tokens"))

    def revoke_token(self, token_id: int) -> TokenView:
        from gpupool.client.access_views import read_token

        answer = self.request("DELETE", f"/v1/tokens/{int(token_id)}")
        return self._read(read_token, answer)

    def audit(self, since: float | None = None) -> AuditLog:
        """The audit log (pool admins), from `since` (seconds since the epoch) on."""
        from gpupool.client.access_views import read_audit

        query: dict[str, str | int | None] = {"since": None if since is None else repr(since)}
        return self._read(read_audit, self.request("GET", "/v1/audit", query=query))


def _page_query(
    include_finished: bool,
    user: str | None,
    project: str | None,
    states: Sequence[str] | None,
    limit: int | None,
    offset: int,
    order: str,
    since: float | None,
    ids: Sequence[int] | None,
) -> dict[str, str | int | None]:
    return {
        "all": "true" if include_finished else None,
        "user": user,
        "project": project,
        "state": ",".join(states) if states else None,
        "limit": limit,
        "offset": offset or None,
        "order": order,
        "since": None if since is None else repr(since),
        "id": None if ids is None else ",".join(str(int(i)) for i in ids),
    }


def _project_path(name: str) -> str:
    return f"/v1/projects/{quoted(name)}"


def _default_path(user: str) -> str:
    return f"/v1/projects/defaults/{quoted(user)}"


def _os_problem(exc: OSError, client: Client) -> str:
    """Why a socket could not be used, in the user's terms."""
    if client.tls is not None:
        import ssl

        if isinstance(exc, ssl.SSLCertVerificationError):
            return (
                f"its TLS certificate does not check out ({exc.verify_message}): give the "
                "CA that signed it with GPUPOOL_CA_CERT=FILE"
            )
        if isinstance(exc, ssl.SSLError):
            return f"TLS failed: {exc.reason or exc}"
    if client.address is None:
        if isinstance(exc, NotADirectoryError) or (
            client.state_dir.exists() and not client.state_dir.is_dir()
        ):
            return "it is not a directory"
        if isinstance(exc, PermissionError):
            return f"permission denied on {client._socket}"
        if "too long" in str(exc):
            chars = len(client._socket)
            return f"its socket path is too long for a Unix socket ({chars} characters)"
    return exc.strerror or str(exc)
