"""GPU health events (store/gpu_health.py; core/gpu_health.py): XID errors, ECC, row remaps,
retired pages, a GPU fallen off the bus, throttling, as NVML reported them; the newest
10,000 of each GPU are kept. A database before this revision has none.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from the store's modules), as in 0001.
    op.create_table(
        "gpu_health_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("code", sa.Integer(), nullable=True),
        sa.Column("detail", sa.String(), nullable=False),
        sa.Column("fault", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_gpu_health_events"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_gpu_health_events_node_gpu_time", "gpu_health_events", ["node", "gpu", "time"]
    )


def downgrade() -> None:
    op.drop_index("ix_gpu_health_events_node_gpu_time", table_name="gpu_health_events")
    op.drop_table("gpu_health_events")
