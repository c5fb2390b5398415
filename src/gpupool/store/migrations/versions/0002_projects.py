"""Projects (teams), departments, project members and users' default projects.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain sa types only (no imports from models.py), as in 0001.
    op.create_table(
        "departments",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("quota", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_departments"),
    )

    projects = op.create_table(
        "projects",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("quota", sa.Double(), nullable=False),
        sa.Column("gpu_limit", sa.Double(), nullable=True),
        sa.Column("weight", sa.Double(), nullable=False),
        sa.Column("department", sa.String(), nullable=True),
        sa.Column("default_time_limit_s", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_projects"),
        sa.ForeignKeyConstraint(
            ["department"], ["departments.name"], name="fk_projects_department_departments"
        ),
    )

    op.create_table(
        "project_members",
        sa.Column("project", sa.String(), nullable=False),
        sa.Column("username", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("project", "username", name="pk_project_members"),
        sa.ForeignKeyConstraint(
            ["project"], ["projects.name"], name="fk_project_members_project_projects"
        ),
    )
    op.create_index("ix_project_members_username", "project_members", ["username"])

    op.create_table(
        "user_defaults",
        sa.Column("username", sa.String(), nullable=False),
        sa.Column("project", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("username", name="pk_user_defaults"),
        sa.ForeignKeyConstraint(
            ["project"], ["projects.name"], name="fk_user_defaults_project_projects"
        ),
    )
    op.create_index("ix_user_defaults_project", "user_defaults", ["project"])

    # The project every job without one lands in: open to all, no guarantee, no cap.
    op.bulk_insert(
        projects,
        [
            {
                "name": "default",
                "quota": 0.0,
                "gpu_limit": None,
                "weight": 1.0,
                "department": None,
                "default_time_limit_s": None,
            }
        ],
    )
    # Projects that jobs already name stay usable: each becomes an open project with defaults.
    op.execute(
        "INSERT INTO projects (name, quota, weight)"
        " SELECT DISTINCT project, 0.0, 1.0 FROM jobs"
        " WHERE project <> 'default'"
    )


def downgrade() -> None:
    op.drop_index("ix_user_defaults_project", table_name="user_defaults")
    op.drop_table("user_defaults")
    op.drop_index("ix_project_members_username", table_name="project_members")
    op.drop_table("project_members")
    op.drop_table("projects")
    op.drop_table("departments")
