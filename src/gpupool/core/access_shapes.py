"""The API's answers about access: API tokens (`/v1/tokens`) and the audit log (`/v1/audit`),
defined as core/wire_shapes.py defines every other answer, with its rules (kept apart so each
module stays one responsibility's size).
"""

# No `from __future__ import annotations`: a shape's annotations must be objects at run time.
from gpupool.core.wire_types import TypedDict


class TokenWire(TypedDict):
    """A token as listed: never its secret nor its hash."""

    id: int
    name: str
    user: str
    created_at: float
    created_by: str
    expires_at: float | None
    last_used_at: float | None
    revoked_at: float | None


class NewTokenWire(TokenWire):
    token: str  # its text: in this answer only


class TokenListWire(TypedDict):
    tokens: list[TokenWire]


class AuditEntryWire(TypedDict):
    time: float
    actor: str
    via: str
    action: str
    target: str
    detail: str


class AuditWire(TypedDict):
    entries: list[AuditEntryWire]
