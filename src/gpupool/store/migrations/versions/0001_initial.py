"""The first tables: jobs, their transitions, GPU allocations and the allocation version.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from models.py): a migration must keep meaning what it
    # meant when it was written, whatever the models become later.
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("token", sa.String(), nullable=True),
        sa.Column("username", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("project", sa.String(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("submit_time", sa.Double(), nullable=False),
        sa.Column("start_time", sa.Double(), nullable=True),
        sa.Column("end_time", sa.Double(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("node", sa.String(), nullable=True),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.Column("restart_count", sa.Integer(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("cancel_requested_at", sa.Double(), nullable=True),
        sa.Column("cancel_cause", sa.Text(), nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("launch_info", sa.JSON(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.UniqueConstraint("token", name="uq_jobs_token"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_jobs_state", "jobs", ["state"])
    op.create_index("ix_jobs_username", "jobs", ["username"])
    op.create_index("ix_jobs_project", "jobs", ["project"])

    op.create_table(
        "transitions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("from_state", sa.String(16), nullable=True),
        sa.Column("to_state", sa.String(16), nullable=False),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_transitions"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_transitions_job_id_jobs"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_transitions_job_id", "transitions", ["job_id"])

    op.create_table(
        "allocations",
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("node", "gpu_index", name="pk_allocations"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_allocations_job_id_jobs"),
    )
    op.create_index("ix_allocations_job_id", "allocations", ["job_id"])

    meta = op.create_table(
        "meta",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("allocation_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_meta"),
    )
    op.bulk_insert(meta, [{"id": 1, "allocation_version": 0}])


def downgrade() -> None:
    op.drop_table("meta")
    op.drop_index("ix_allocations_job_id", table_name="allocations")
    op.drop_table("allocations")
    op.drop_index("ix_transitions_job_id", table_name="transitions")
    op.drop_table("transitions")
    op.drop_index("ix_jobs_project", table_name="jobs")
    op.drop_index("ix_jobs_username", table_name="jobs")
    op.drop_index("ix_jobs_state", table_name="jobs")
    op.drop_table("jobs")
