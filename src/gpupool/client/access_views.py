"""Identities, API tokens and the audit log as the API gives them, typed: see
client/views.py (imported by the Client methods that read them)."""

from __future__ import annotations

from gpupool.client.wire_json import JsonObject, JsonValue, conform, json_of
from gpupool.core.access_shapes import AuditWire, NewTokenWire, TokenListWire, TokenWire
from gpupool.core.values import record, unlisted
from gpupool.core.wire_shapes import WhoamiWire


@record
class Identity:
    """Who the pool takes the client to be (GET /v1/whoami)."""

    user: str
    via: str  # "unix uid 1001", "token 7"
    pool_admin: bool
    mode: str  # "shared" or "personal"


def read_identity(value: JsonValue) -> Identity:
    w = conform(WhoamiWire, value)
    return Identity(w["user"], w["via"], w["pool_admin"], w["mode"])


@record
class TokenView:
    id: int
    name: str
    user: str
    created_at: float
    created_by: str
    expires_at: float | None
    last_used_at: float | None
    revoked_at: float | None
    wire: JsonObject = unlisted()

    @classmethod
    def read(cls, w: TokenWire) -> TokenView:
        return cls(
            id=w["id"],
            name=w["name"],
            user=w["user"],
            created_at=w["created_at"],
            created_by=w["created_by"],
            expires_at=w["expires_at"],
            last_used_at=w["last_used_at"],
            revoked_at=w["revoked_at"],
            wire=json_of(w),
        )


def read_token(value: JsonValue) -> TokenView:
    return TokenView.read(conform(TokenWire, value))


@record
class NewToken:
    """A token just created: its record and its text (shown this once)."""

    record: TokenView
    token: str


def read_new_token(value: JsonValue) -> NewToken:
    w = conform(NewTokenWire, value)
    return NewToken(TokenView.read(w), w["token"])


@record
class TokenList:
    tokens: tuple[TokenView, ...]
    wire: JsonObject = unlisted()


def read_token_list(value: JsonValue) -> TokenList:
    w = conform(TokenListWire, value)
    return TokenList(tuple(TokenView.read(t) for t in w["tokens"]), json_of(w))


@record
class AuditEntryView:
    time: float
    actor: str
    via: str
    action: str
    target: str
    detail: str


@record
class AuditLog:
    entries: tuple[AuditEntryView, ...]
    wire: JsonObject = unlisted()


def read_audit(value: JsonValue) -> AuditLog:
    w = conform(AuditWire, value)
    entries = tuple(
        AuditEntryView(e["time"], e["actor"], e["via"], e["action"], e["target"], e["detail"])
        for e in w["entries"]
    )
    return AuditLog(entries, json_of(w))
