"""Identities, API tokens and the audit log as the API gives them, typed: see
client/views.py (imported by the Client methods that read them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpupool.client.wire_json import Fields, JsonObject, JsonValue


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the pool takes the client to be (GET /v1/whoami)."""

    user: str
    via: str  # "unix uid 1001", "token 7"
    pool_admin: bool
    mode: str  # "shared" or "personal"


def read_identity(value: JsonValue) -> Identity:
    f = Fields(value)
    return Identity(f.text("user"), f.text("via"), f.flag("pool_admin"), f.text("mode"))


@dataclass(frozen=True, slots=True)
class TokenView:
    id: int
    name: str
    user: str
    created_at: float
    created_by: str
    expires_at: float | None
    last_used_at: float | None
    revoked_at: float | None
    wire: JsonObject = field(repr=False, compare=False)

    @classmethod
    def read(cls, f: Fields) -> TokenView:
        return cls(
            id=f.whole("id"),
            name=f.text("name"),
            user=f.text("user"),
            created_at=f.number("created_at"),
            created_by=f.text("created_by"),
            expires_at=f.opt_number("expires_at"),
            last_used_at=f.opt_number("last_used_at"),
            revoked_at=f.opt_number("revoked_at"),
            wire=f.data,
        )


def read_token(value: JsonValue) -> TokenView:
    return TokenView.read(Fields(value))


@dataclass(frozen=True, slots=True)
class NewToken:
    """A token just created: its record and its text (shown this once)."""

    record: TokenView
    token: str


def read_new_token(value: JsonValue) -> NewToken:
    f = Fields(value)
    return NewToken(TokenView.read(f), f.text("token"))


@dataclass(frozen=True, slots=True)
class TokenList:
    tokens: tuple[TokenView, ...]
    wire: JsonObject = field(repr=False, compare=False)


def read_token_list(value: JsonValue) -> TokenList:
    f = Fields(value)
    return TokenList(tuple(TokenView.read(Fields(v, at)) for at, v in f.items("tokens")), f.data)


@dataclass(frozen=True, slots=True)
class AuditEntryView:
    time: float
    actor: str
    via: str
    action: str
    target: str
    detail: str


@dataclass(frozen=True, slots=True)
class AuditLog:
    entries: tuple[AuditEntryView, ...]
    wire: JsonObject = field(repr=False, compare=False)


def read_audit(value: JsonValue) -> AuditLog:
    f = Fields(value)
    entries = []
    for at, v in f.items("entries"):
        e = Fields(v, at)
        entries.append(
            AuditEntryView(
                e.number("time"),
                e.text("actor"),
                e.text("via"),
                e.text("action"),
                e.text("target"),
                e.text("detail"),
            )
        )
    return AuditLog(tuple(entries), f.data)
