"""GPU-seconds idle while a job that could use them waited, by cause (issue 33; store/
idle_waiting.py): one row per hour and cause, so the daemon's counter survives a restart and
`gpupool usage` reports a window. A database before this revision starts with none: what
earlier daemons counted was kept in memory only.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-12
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from the store's modules), as in 0001.
    op.create_table(
        "idle_waiting",
        sa.Column("hour", sa.Double(), nullable=False),
        sa.Column("cause", sa.String(), nullable=False),
        sa.Column("gpu_seconds", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("hour", "cause", name="pk_idle_waiting"),
    )


def downgrade() -> None:
    op.drop_table("idle_waiting")
