"""GPU samples (full rate and rolled up) and each job's GPU use (totals and per hour).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from the store's modules), as in 0001.
    op.create_table(
        "gpu_samples",
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("utilization_pct", sa.Double(), nullable=True),
        sa.Column("memory_used_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_total_bytes", sa.BigInteger(), nullable=False),
        sa.Column("power_w", sa.Double(), nullable=True),
        sa.Column("temperature_c", sa.Double(), nullable=True),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("node", "gpu_index", "time", name="pk_gpu_samples"),
    )
    op.create_index("ix_gpu_samples_time", "gpu_samples", ["time"])
    op.create_table(
        "gpu_sample_rollups",
        sa.Column("period_s", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("utilization_pct", sa.Double(), nullable=True),
        sa.Column("utilization_max_pct", sa.Double(), nullable=True),
        sa.Column("memory_used_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_total_bytes", sa.BigInteger(), nullable=False),
        sa.Column("power_w", sa.Double(), nullable=True),
        sa.Column("temperature_c", sa.Double(), nullable=True),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint(
            "period_s", "node", "gpu_index", "time", name="pk_gpu_sample_rollups"
        ),
    )
    op.create_index(
        "ix_gpu_sample_rollups_period_s_time", "gpu_sample_rollups", ["period_s", "time"]
    )
    op.create_table(
        "job_usage",
        sa.Column("job_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("utilization_sum", sa.Double(), nullable=False),
        sa.Column("utilization_bins", sa.JSON(), nullable=False),
        sa.Column("utilization_max_pct", sa.Double(), nullable=True),
        sa.Column("peak_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("energy_j", sa.Double(), nullable=False),
        sa.Column("used_gpu_s", sa.Double(), nullable=False),
        sa.Column("sampled_gpu_s", sa.Double(), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_job_usage_job_id_jobs"),
        sa.PrimaryKeyConstraint("job_id", name="pk_job_usage"),
    )
    op.create_table(
        "job_usage_hours",
        sa.Column("job_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("hour", sa.Double(), nullable=False),
        sa.Column("used_gpu_s", sa.Double(), nullable=False),
        sa.Column("sampled_gpu_s", sa.Double(), nullable=False),
        sa.Column("energy_j", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_job_usage_hours_job_id_jobs"),
        sa.PrimaryKeyConstraint("job_id", "hour", name="pk_job_usage_hours"),
    )
    op.create_index("ix_job_usage_hours_hour", "job_usage_hours", ["hour"])


def downgrade() -> None:
    op.drop_index("ix_job_usage_hours_hour", table_name="job_usage_hours")
    op.drop_table("job_usage_hours")
    op.drop_table("job_usage")
    op.drop_index("ix_gpu_sample_rollups_period_s_time", table_name="gpu_sample_rollups")
    op.drop_table("gpu_sample_rollups")
    op.drop_index("ix_gpu_samples_time", table_name="gpu_samples")
    op.drop_table("gpu_samples")
