"""Benchmark results (issue 17, `gpupool bench`): one row per saved result, with the
machine, GPU model, driver and date, and the result's JSON whole.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from the store's modules), as in 0001.
    op.create_table(
        "benchmark_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("username", sa.String(), nullable=False),
        sa.Column("benchmark", sa.String(64), nullable=False),
        sa.Column("hostname", sa.String(), nullable=False),
        sa.Column("device", sa.String(16), nullable=False),
        sa.Column("gpu_model", sa.String(), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("driver", sa.String(), nullable=True),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("saved_at", sa.Double(), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_benchmark_results"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_benchmark_results_benchmark", "benchmark_results", ["benchmark"])


def downgrade() -> None:
    op.drop_index("ix_benchmark_results_benchmark", table_name="benchmark_results")
    op.drop_table("benchmark_results")
