"""Drained GPUs (issue 36; store/drains.py): one row per GPU an admin drained, kept until
resumed. A database before this revision has none.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from the store's modules), as in 0001.
    op.create_table(
        "drained_gpus",
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("by", sa.String(), nullable=False),
        sa.Column("since", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("node", "gpu", name="pk_drained_gpus"),
    )


def downgrade() -> None:
    op.drop_table("drained_gpus")
