"""The daemon lease: one row naming the daemon that schedules on this database, with its
heartbeat, so a second daemon with another state directory refuses to start (store/lease.py).

Revision ID: 0004
Revises: 0003
Create Date: 2025-01-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from the store's modules), as in 0001.
    op.create_table(
        "daemon_lease",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("state_dir", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("acquired_at", sa.Double(), nullable=False),
        sa.Column("heartbeat_at", sa.Double(), nullable=False),
        sa.Column("ttl_s", sa.Double(), nullable=False),
        sa.Column("released_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_daemon_lease"),
    )


def downgrade() -> None:
    op.drop_table("daemon_lease")
