"""Who is calling: resolved once per request, from what the server itself can trust.

- The Unix socket: the kernel's peer credentials (api/connections.py, SO_PEERCRED); the
  caller is the uid's user name (`uid-N` for a uid without a passwd entry).
- TCP: `Authorization: Bearer gpupool_<id>_<secret>`, an API token (core/tokens.py) that
  exists, is neither revoked nor expired, and whose secret matches its salted hash; the caller
  is the token's user. A bad token is 401 `unauthenticated`, wherever it comes from.
- TCP from this machine (a loopback address) with no Authorization header at all: the owner
  of the client's socket, as the kernel lists it in /proc/net/tcp (api/loopback.py; a
  browser on the pool's machine, the dashboard). Only where the daemon can read those tables
  and `--no-loopback-identity` is not given; otherwise, and from anywhere else, 401.
Nothing a client writes in a body, a query or a header other than its token names it.

`caller_of` is the FastAPI dependency every /v1 route has (app.py puts it on the router, so
a route that forgets it still authenticates); a route that needs the caller takes
`CallerDep`, which FastAPI resolves once per request. `Access` also holds the pool's
`Authority` (mode, admins) and writes the audit log.
"""

from __future__ import annotations

import functools
import logging
import os
import pwd
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Protocol

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from gpupool.api.connections import Listener, listener_of, peer_of, tcp_client_of
from gpupool.api.loopback import Endpoint, SocketOwners
from gpupool.core import tokens
from gpupool.core.access import Action, Authority, Caller, Mode, Target, Via, permit
from gpupool.core.audit import AuditAction, AuditEntry
from gpupool.core.clock import Clock
from gpupool.core.tokens import Minted, TokenRecord

if TYPE_CHECKING:
    from gpupool.core.job import Job

log = logging.getLogger("gpupool.audit")

# last_used_at is written at most this often per token: a token in constant use must not
# turn every request into a database write.
TOUCH_EVERY_S = 60.0


class Unauthenticated(Exception):
    """401: over TCP without a valid API token."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Forbidden(Exception):
    """403: the caller may not do this; the message says who may."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AccessStore(Protocol):
    """What identities, tokens and the audit log need of the store (store.Store has it)."""

    def token(self, token_id: int) -> tokens.TokenRecord | None: ...

    def tokens(self, user: str | None = None, *, revoked: bool = False) -> list[TokenRecord]: ...

    def create_token(
        self,
        user: str,
        name: str,
        minted: Minted,
        now: float,
        expires_at: float | None,
        created_by: str,
    ) -> TokenRecord: ...

    def revoke_token(self, token_id: int, now: float) -> TokenRecord: ...

    def touch_token(self, token_id: int, now: float) -> None: ...

    def record_audit(self, entry: AuditEntry) -> None: ...

    def audit_entries(self, since: float | None = None) -> list[AuditEntry]: ...


NAME_TTL_S = 60.0  # a user renamed in the passwd database is seen by then


def user_name(uid: int) -> str:
    """The user name of `uid`, or `uid-N` when the passwd database has none. Remembered for
    up to NAME_TTL_S: each request asks (identity, rate limit) and the lookup reads the
    passwd database (NSS: a file, or a directory server) in the event loop."""
    return _user_name(uid, int(time.monotonic() // NAME_TTL_S))


@functools.lru_cache(maxsize=4096)
def _user_name(uid: int, period: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid-{uid}"


NO_TOKEN = (
    "this pool needs an API token over TCP: send `Authorization: Bearer TOKEN` (the CLI "
    "reads $GPUPOOL_TOKEN or ~/.config/gpupool/token); create one with `gpupool token "
    "create` on the pool's machine"
)
BAD_TOKEN = "the API token is not valid (unknown, revoked or expired): create a new one"


class Access:
    """The pool's authority, the token store, the clock: identifies callers, checks what
    they may do, and records what the audit log keeps."""

    def __init__(
        self,
        authority: Authority,
        store: AccessStore,
        clock: Clock,
        socket_owners: SocketOwners | None = None,
    ) -> None:
        self.authority = authority
        self.store = store
        self.clock = clock
        # Who owns a loopback TCP client's socket; None: every TCP client needs a token.
        self.socket_owners = socket_owners

    def identify(self, scope: Mapping[str, object], authorization: str | None) -> Caller:
        """The caller of a request (its ASGI scope and Authorization header). A request that
        sends a token is judged by its token alone: a bad one is 401 even from this machine."""
        local = self.local_caller(scope)
        if local is not None:
            return local
        if authorization is None:
            loopback = self.loopback_caller(scope)
            if loopback is not None:
                return loopback
        return self._token_caller(authorization)

    def local_caller(self, scope: Mapping[str, object]) -> Caller | None:
        """The caller of a request on the Unix socket, from its peer credentials; None on
        TCP (a token must say who)."""
        if listener_of(scope) is Listener.UNIX:
            peer = peer_of(scope)
            if peer is not None:
                return Caller(user_name(peer.uid), Via.UNIX, uid=peer.uid)
        return None

    def known_loopback_caller(self, scope: Mapping[str, object]) -> Caller | None:
        """The loopback caller of a connection already looked up (no I/O: for the event
        loop); None if not looked up yet, or not one."""
        tcp = tcp_client_of(scope)
        if self.socket_owners is None or tcp is None or tcp.owner_uid is None:
            return None
        return Caller(user_name(tcp.owner_uid), Via.LOOPBACK, uid=tcp.owner_uid)

    def loopback_caller(self, scope: Mapping[str, object]) -> Caller | None:
        """The owner of the client's socket of a TCP connection from a loopback address
        (api/loopback.py), looked up once a connection (it reads /proc/net: a worker
        thread's job); None when it cannot be known."""
        tcp = tcp_client_of(scope)
        if self.socket_owners is None or tcp is None:
            return None
        if tcp.owner_uid is None:
            client, server = _endpoint(scope.get("client")), _endpoint(scope.get("server"))
            if client is None or server is None or not client.loopback:
                return None
            tcp.owner_uid = self.socket_owners.owner_uid(client, server)
        return self.known_loopback_caller(scope)

    def _token_caller(self, authorization: str | None) -> Caller:
        if not authorization:
            raise Unauthenticated(NO_TOKEN)
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            raise Unauthenticated(NO_TOKEN)
        presented = tokens.parse(value)
        if presented is None:
            raise Unauthenticated(BAD_TOKEN)
        record = self.store.token(presented.token_id)
        now = self.clock.now()
        if record is None or not tokens.matches(record, presented) or not record.usable(now):
            raise Unauthenticated(BAD_TOKEN)
        if record.last_used_at is None or now - record.last_used_at >= TOUCH_EVERY_S:
            self.store.touch_token(record.id, now)
        return Caller(record.user, Via.TOKEN, token_id=record.id)

    def require(self, caller: Caller, action: Action, target: Target | None = None) -> None:
        """Forbidden unless `caller` may do `action` to `target`."""
        refusal = permit(self.authority, caller, action, target or Target())
        if refusal is not None:
            raise Forbidden(refusal.message)

    def may(self, caller: Caller, action: Action, target: Target) -> bool:
        return permit(self.authority, caller, action, target) is None

    def sees_private(self, caller: Caller, job: Job) -> bool:
        """Whether `caller` may see `job`'s environment, command, workdir and log."""
        target = Target(owner=job.user, project=job.spec.project, job_id=job.id)
        return permit(self.authority, caller, Action.READ_JOB_PRIVATE, target) is None

    def private_reader(self, caller: Caller) -> Callable[[Job], bool]:
        """`sees_private` for the many jobs of one listing: answered once per (owner,
        project), the only figures of the job the rule reads (its id only names it in a
        refusal's words). For one request: a role granted meanwhile shows on the next."""
        seen: dict[tuple[str, str], bool] = {}

        def sees(job: Job) -> bool:
            key = (job.user, job.spec.project)
            found = seen.get(key)
            if found is None:
                found = seen[key] = self.sees_private(caller, job)
            return found

        return sees

    def audit(self, caller: Caller, action: AuditAction, target: str, detail: str = "") -> None:
        entry = AuditEntry(self.clock.now(), caller.name, caller.how(), action, target, detail)
        self.store.record_audit(entry)
        log.info(
            "audit: %s (%s) %s %s%s",
            caller.name,
            entry.via,
            action.value,
            target,
            f": {detail}" if detail else "",
        )


async def caller_of(request: Request) -> Caller:
    """The FastAPI dependency: the request's caller (Unauthenticated over TCP without one).
    A local caller, and a loopback one already looked up, is named in the event loop (the
    kernel told who it is); a token, or a loopback client's socket, is looked up in a worker
    thread, as it reads the store or /proc/net."""
    access: Access = request.app.state.access
    local = access.local_caller(request.scope)
    if local is not None:
        return local
    authorization = request.headers.get("authorization")
    if authorization is None:
        known = access.known_loopback_caller(request.scope)
        if known is not None:
            return known
    return await run_in_threadpool(access.identify, request.scope, authorization)


def _endpoint(address: object) -> Endpoint | None:
    """An ASGI scope's `client` or `server`, (host, port), as an Endpoint."""
    if isinstance(address, (tuple, list)) and len(address) >= 2:
        host, port = address[0], address[1]
        if isinstance(host, str) and isinstance(port, int):
            return Endpoint.of(host, port)
    return None


CallerDep = Annotated[Caller, Depends(caller_of)]


def pool_authority(
    pool_admins: tuple[str, ...] = (),
    project_admins: tuple[tuple[str, tuple[str, ...]], ...] = (),
    euid: int | None = None,
) -> Authority:
    """The Authority of a daemon running with effective uid `euid` (default: this
    process's): shared mode as root, personal mode otherwise (common decision of issue 13)."""
    euid = os.geteuid() if euid is None else euid
    return Authority(
        mode=Mode.SHARED if euid == 0 else Mode.PERSONAL,
        daemon_user=user_name(euid),
        pool_admins=frozenset(pool_admins),
        project_admins={name: frozenset(admins) for name, admins in project_admins},
    )
