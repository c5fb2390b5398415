"""Shared GPUs: several fractional jobs on one GPU, each granted an amount of its memory.

allocations: a row per (GPU, job) now, keyed (node, gpu_index, job_id), with the memory
granted to a fractional job (NULL: the job holds the GPU whole). A partial unique index on
(node, gpu_index) where memory_bytes IS NULL keeps two whole-GPU jobs off one GPU at the
database level, as the old primary key did. jobs: the memory granted, kept after the job ends
like `gpus`.

Revision ID: 0003
Revises: 0002
Create Date: 2025-01-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_WHOLE = "memory_bytes IS NULL"


def upgrade() -> None:
    # Plain sa types only (no imports from models.py), as in 0001. BigInteger: GPU memory
    # in bytes does not fit PostgreSQL's 32-bit integer.
    with op.batch_alter_table("allocations") as batch:  # SQLite: the table is rebuilt
        batch.add_column(sa.Column("memory_bytes", sa.BigInteger(), nullable=True))
        batch.drop_constraint("pk_allocations", type_="primary")
        batch.create_primary_key("pk_allocations", ["node", "gpu_index", "job_id"])
    op.create_index(
        "ux_allocations_whole_gpu",
        "allocations",
        ["node", "gpu_index"],
        unique=True,
        sqlite_where=sa.text(_WHOLE),
        postgresql_where=sa.text(_WHOLE),
    )
    op.add_column("jobs", sa.Column("gpu_memory_bytes", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("gpu_memory_bytes")
    op.drop_index("ux_allocations_whole_gpu", table_name="allocations")
    # Shared GPUs cannot be told apart under the old key: their allocations are dropped.
    op.execute("DELETE FROM allocations WHERE memory_bytes IS NOT NULL")
    with op.batch_alter_table("allocations") as batch:
        batch.drop_constraint("pk_allocations", type_="primary")
        batch.create_primary_key("pk_allocations", ["node", "gpu_index"])
        batch.drop_column("memory_bytes")
