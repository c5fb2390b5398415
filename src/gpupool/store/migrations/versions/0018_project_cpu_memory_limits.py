"""Each project's CPU and memory limits (Slurm's GrpTRES cpu and mem): the most CPUs and
bytes of host memory its running jobs may hold at once (their --cpus and --mem). Nullable,
no default: a project made before this revision has no such limit, as it had none.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from the store's modules), as in 0001.
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("cpu_limit", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("memory_limit_bytes", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("memory_limit_bytes")
        batch.drop_column("cpu_limit")
