"""The Store's API tokens and audit log (a mixin of Store, which provides the sessions).

Tokens: one row per token, its secret kept only as a salted hash (core/tokens.py); a revoked
token keeps its row (marked revoked), so the audit log's `token 7` still names it. Audit: one
row per entry, append-only (core/audit.py says what is recorded).
"""

from __future__ import annotations

from sqlalchemy import Double, Index, Integer, String, Text, select, update
from sqlalchemy.orm import Mapped, mapped_column

from gpupool.core.audit import AuditAction, AuditEntry
from gpupool.core.store_errors import UnknownToken
from gpupool.core.tokens import Minted, TokenRecord
from gpupool.store.models import Base
from gpupool.store.sessions import SessionMethods


class TokenRow(Base):
    __tablename__ = "api_tokens"
    __table_args__ = ({"sqlite_autoincrement": True},)  # an id is never handed out twice

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user: Mapped[str] = mapped_column("username", String, index=True)
    name: Mapped[str] = mapped_column(String)
    salt: Mapped[str] = mapped_column(String)
    digest: Mapped[str] = mapped_column(String)
    created_at: Mapped[float] = mapped_column(Double)
    created_by: Mapped[str] = mapped_column(String)
    expires_at: Mapped[float | None] = mapped_column(Double)
    last_used_at: Mapped[float | None] = mapped_column(Double)
    revoked_at: Mapped[float | None] = mapped_column(Double)


class AuditRow(Base):
    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_time", "time"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Double)
    actor: Mapped[str] = mapped_column(String)
    via: Mapped[str] = mapped_column(String)
    action: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(Text)
    detail: Mapped[str] = mapped_column(Text)


def _record(row: TokenRow) -> TokenRecord:
    return TokenRecord(
        id=row.id,
        user=row.user,
        name=row.name,
        salt=row.salt,
        digest=row.digest,
        created_at=row.created_at,
        created_by=row.created_by,
        expires_at=row.expires_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )


class TokenMethods(SessionMethods):
    def create_token(
        self,
        user: str,
        name: str,
        minted: Minted,
        now: float,
        expires_at: float | None,
        created_by: str,
    ) -> TokenRecord:
        with self._write() as s:
            row = TokenRow(
                user=user,
                name=name,
                salt=minted.salt,
                digest=minted.digest,
                created_at=now,
                created_by=created_by,
                expires_at=expires_at,
                last_used_at=None,
                revoked_at=None,
            )
            s.add(row)
            s.flush()
            return _record(row)

    def token(self, token_id: int) -> TokenRecord | None:
        with self._read() as s:
            row = s.get(TokenRow, token_id)
            return None if row is None else _record(row)

    def tokens(self, user: str | None = None, *, revoked: bool = False) -> list[TokenRecord]:
        """Tokens by id: of `user` (None: everyone's); revoked ones only if `revoked`."""
        stmt = select(TokenRow).order_by(TokenRow.id)
        if user is not None:
            stmt = stmt.where(TokenRow.user == user)
        if not revoked:
            stmt = stmt.where(TokenRow.revoked_at.is_(None))
        with self._read() as s:
            return [_record(r) for r in s.scalars(stmt)]

    def revoke_token(self, token_id: int, now: float) -> TokenRecord:
        """Mark it revoked (kept: the audit log names it); UnknownToken if there is none.
        Revoking a revoked token keeps its first revocation time."""
        with self._write() as s:
            row = s.get(TokenRow, token_id)
            if row is None:
                raise UnknownToken(token_id)
            if row.revoked_at is None:
                row.revoked_at = now
            return _record(row)

    def touch_token(self, token_id: int, now: float) -> None:
        """Note that the token was used at `now`."""
        with self._write() as s:
            s.execute(update(TokenRow).where(TokenRow.id == token_id).values(last_used_at=now))

    # -- the audit log

    def record_audit(self, entry: AuditEntry) -> None:
        with self._write() as s:
            s.add(
                AuditRow(
                    time=entry.time,
                    actor=entry.actor,
                    via=entry.via,
                    action=entry.action.value,
                    target=entry.target,
                    detail=entry.detail,
                )
            )

    def audit_entries(self, since: float | None = None) -> list[AuditEntry]:
        """Entries in the order they were written (from `since` on, when given)."""
        stmt = select(AuditRow).order_by(AuditRow.id)
        if since is not None:
            stmt = stmt.where(AuditRow.time >= since)
        with self._read() as s:
            return [_entry(r) for r in s.scalars(stmt)]


def _entry(row: AuditRow) -> AuditEntry:
    return AuditEntry(
        time=row.time,
        actor=row.actor,
        via=row.via,
        action=AuditAction(row.action),
        target=row.target,
        detail=row.detail,
    )
