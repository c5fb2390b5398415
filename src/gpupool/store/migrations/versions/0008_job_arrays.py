"""Job arrays: the array a job is a task of (its first task's id), for `cancel ARRAYID`
and the folded `queue` line.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("array_id", sa.Integer(), nullable=True))
    op.create_index("ix_jobs_array_id", "jobs", ["array_id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_array_id", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("array_id")
