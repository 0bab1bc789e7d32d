"""Deleted topics whose cold files are still in the bucket; an index for due deletes.

Revision ID: 0008
Revises: 0007
Create Date: 2027-01-10

- ``deleted_topics``: a topic deleted after anything of it was registered for tiering leaves a
  row here, in the transaction that deletes it. The compaction role deletes the objects under
  the topic's table root (``{prefix}/topics/{name}/``) once a grace period is over, then the
  row. Until then the name cannot be used again: a new topic of that name would write into
  the old topic's Delta table (Kafka also refuses a topic that is marked for deletion).
- ``cold_files_due_deletes``: the compaction sweep asks for delete_started rows past
  ``delete_after`` on every pass; a partial index keeps that from scanning the manifest.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision = "0008"
down_revision: str | None = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deleted_topics",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("topic_id", UUID(as_uuid=False), nullable=False),
        sa.Column(
            "deleted_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_index(
        "cold_files_due_deletes",
        "cold_files",
        ["delete_after"],
        postgresql_where=sa.text("state = 'delete_started'"),
    )


def downgrade() -> None:
    op.drop_index("cold_files_due_deletes", table_name="cold_files")
    op.drop_table("deleted_topics")
