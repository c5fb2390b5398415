"""Backends (issue 16): a job's run on a backend is known by the backend's own name for it
(`jobs.backend_ref`, e.g. `slurm://cluster/1234`); the pool has an id its backends put in
their run names (`meta.pool_id`, chosen on first use).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("backend_ref", sa.Text(), nullable=True))
    with op.batch_alter_table("meta") as batch:
        batch.add_column(sa.Column("pool_id", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("meta") as batch:
        batch.drop_column("pool_id")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("backend_ref")
