"""Each project's minimum run times (issue 33, KAI-Scheduler's min-runtime): how long one of
its running jobs runs before a job of a higher priority class may preempt it, and before
another project may reclaim its GPUs. Nullable, no default: a project made before this
revision takes the pool's defaults (PolicyConfig.min_runtime_s for preemption, none for
reclaim), as it did.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-10
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("preempt_min_runtime_s", "reclaim_min_runtime_s")


def upgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        for name in _COLUMNS:
            batch.add_column(sa.Column(name, sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
