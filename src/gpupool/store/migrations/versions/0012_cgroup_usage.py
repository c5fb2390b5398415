"""CPU time and memory per job, from its runs' cgroups (core/cgroup_usage.py): its last ended
run's CPU-seconds, peak and mean memory and the limit it ran under, and the CPU-seconds of
all its runs (what accounting charges). Nullable, no default: a job that ran before this
revision, a backend's job or one run without cgroups has no figures, and none are made up.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("cpu_seconds", sa.Double),
    ("memory_peak_bytes", sa.BigInteger),
    ("memory_mean_bytes", sa.BigInteger),
    ("memory_limit_bytes", sa.BigInteger),
    ("cpu_seconds_all_runs", sa.Double),
)


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for name, kind in _COLUMNS:
            batch.add_column(sa.Column(name, kind(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
