"""/v1/tokens (API tokens) and /v1/audit (the audit log).

Tokens are created, listed and revoked by their user, or by a pool admin for anyone
(core/access.py); over TCP these routes need a token themselves, like every other. A new
token's text is in the creating answer only: the store keeps its salted hash
(core/tokens.py). Creating or revoking another user's token is audited.
"""

from __future__ import annotations

import pwd
from typing import Annotated

from fastapi import APIRouter, Body, Path, Query

from gpupool.api.checks import MAX_INT64
from gpupool.api.identity import Access, CallerDep
from gpupool.api.openapi import refusals
from gpupool.core import tokens
from gpupool.core.access import Action, Target
from gpupool.core.access_shapes import (
    AuditEntryWire,
    AuditWire,
    NewTokenWire,
    TokenListWire,
    TokenWire,
)
from gpupool.core.audit import AuditAction, AuditEntry
from gpupool.core.project import USER_RE
from gpupool.core.store_errors import UnknownToken
from gpupool.service import RequestRefused

DEFAULT_EXPIRES_S = 90 * 86400.0
MAX_EXPIRES_S = 10 * 366 * 86400.0
TokenId = Annotated[int, Path(ge=1, le=MAX_INT64, description="a token id")]


def token_to_wire(t: tokens.TokenRecord) -> TokenWire:
    """A token as listed: never its secret nor its hash."""
    return {
        "id": t.id,
        "name": t.name,
        "user": t.user,
        "created_at": t.created_at,
        "created_by": t.created_by,
        "expires_at": t.expires_at,
        "last_used_at": t.last_used_at,
        "revoked_at": t.revoked_at,
    }


def audit_to_wire(e: AuditEntry) -> AuditEntryWire:
    return {
        "time": e.time,
        "actor": e.actor,
        "via": e.via,
        "action": e.action.value,
        "target": e.target,
        "detail": e.detail,
    }


def add_token_routes(app: APIRouter, access: Access) -> None:
    store = access.store

    @app.post("/v1/tokens", status_code=201, responses=refusals(403))
    def create_token(
        caller: CallerDep,
        name: str = Body("default", max_length=tokens.MAX_NAME_CHARS),
        user: str | None = Body(None, max_length=64),
        expires_s: float | None = Body(DEFAULT_EXPIRES_S, gt=0, le=MAX_EXPIRES_S),
    ) -> NewTokenWire:
        """A new token for the caller (or, for a pool admin, `user`), valid `expires_s`
        seconds (null: until revoked). Its text is in this answer only."""
        owner = caller.name if user is None else user
        access.require(caller, Action.MANAGE_TOKENS, Target(owner=owner))
        if not tokens.NAME_RE.fullmatch(name):
            raise RequestRefused(
                "invalid_token_name",
                f"a token name is 1-{tokens.MAX_NAME_CHARS} letters, digits or _.@:+-, "
                f"got {name[:70]!r}",
            )
        if not USER_RE.fullmatch(owner):
            raise RequestRefused("unknown_user", f"not a user name: {owner[:70]!r}")
        if access.authority.shared and owner != caller.name and not _exists(owner):
            raise RequestRefused("unknown_user", f"no user {owner} on the pool's machine")
        now = access.clock.now()
        minted = tokens.mint()
        expires_at = None if expires_s is None else now + expires_s
        record = store.create_token(owner, name, minted, now, expires_at, caller.name)
        if owner != caller.name:
            access.audit(
                caller, AuditAction.CREATE_TOKEN, f"token {record.id} of {owner}", f"name {name}"
            )
        return {**token_to_wire(record), "token": minted.text(record.id)}

    @app.get("/v1/tokens", responses=refusals(403))
    def list_tokens(caller: CallerDep) -> TokenListWire:
        """The caller's tokens; a pool admin's answer has everyone's."""
        access.require(caller, Action.MANAGE_TOKENS, Target(owner=caller.name))
        admin = access.authority.is_pool_admin(caller.name)
        found = store.tokens(None if admin else caller.name)
        return {"tokens": [token_to_wire(t) for t in found]}

    @app.delete("/v1/tokens/{token_id}", responses=refusals(403, 404))
    def revoke_token(token_id: TokenId, caller: CallerDep) -> TokenWire:
        found = store.token(token_id)
        if found is None or not access.may(caller, Action.MANAGE_TOKENS, Target(found.user)):
            # Another user's token is not even named to someone who may not manage it.
            access.require(caller, Action.MANAGE_TOKENS, Target(owner=caller.name))
            raise UnknownToken(token_id)
        revoked = store.revoke_token(token_id, access.clock.now())
        if found.user != caller.name:
            access.audit(caller, AuditAction.REVOKE_TOKEN, f"token {token_id} of {found.user}")
        return token_to_wire(revoked)

    @app.get("/v1/audit", responses=refusals(403))
    def audit_log(caller: CallerDep, since: float | None = Query(None, ge=0, le=1e11)) -> AuditWire:
        """The audit log (pool admins), from `since` (seconds since the epoch) on."""
        access.require(caller, Action.READ_AUDIT)
        return {"entries": [audit_to_wire(e) for e in store.audit_entries(since)]}


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True
