"""API tokens (salted hashes only) and the audit log.

Revision ID: 0005
Revises: 0004
Create Date: 2025-01-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from the store's modules), as in 0001.
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("username", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("salt", sa.String(), nullable=False),
        sa.Column("digest", sa.String(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=True),
        sa.Column("last_used_at", sa.Double(), nullable=True),
        sa.Column("revoked_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_api_tokens_username", "api_tokens", ["username"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("via", sa.String(), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_audit_log_time", "audit_log", ["time"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_time", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_api_tokens_username", table_name="api_tokens")
    op.drop_table("api_tokens")
