"""Each project's per-user caps (Slurm's MaxTRESPerUser and MaxJobsPerUser): the most GPUs
one user's running jobs of the project may hold at once, and the most running jobs one user
may have in it. Nullable, no default: a project made before this revision takes the pool's
defaults (none unless the daemon sets them), as it did.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from the store's modules), as in 0001.
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("max_gpus_per_user", sa.Double(), nullable=True))
        batch.add_column(sa.Column("max_running_jobs_per_user", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("max_running_jobs_per_user")
        batch.drop_column("max_gpus_per_user")
