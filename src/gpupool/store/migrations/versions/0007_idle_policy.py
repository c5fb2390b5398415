"""Each project's idle-GPU policy (timeout, threshold, action), and the stops and requeues
it made (for accounting).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("idle_timeout_s", sa.Double(), nullable=True))
        batch.add_column(
            sa.Column("idle_threshold_pct", sa.Double(), nullable=False, server_default="5")
        )
        batch.add_column(sa.Column("idle_action", sa.String(16), nullable=True))
    op.create_table(
        "idle_actions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("limit_end", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_idle_actions_job_id_jobs"),
        sa.PrimaryKeyConstraint("id", name="pk_idle_actions"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_idle_actions_time", "idle_actions", ["time"])


def downgrade() -> None:
    op.drop_index("ix_idle_actions_time", table_name="idle_actions")
    op.drop_table("idle_actions")
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("idle_action")
        batch.drop_column("idle_threshold_pct")
        batch.drop_column("idle_timeout_s")
