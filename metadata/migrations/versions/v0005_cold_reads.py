"""Cold reads: an index of committed cold files in offset order (docs/design.md §4 "Fetch resolves
an
offset through it").

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-14

Fetch resolves an offset with `base_offset <= o ORDER BY base_offset DESC LIMIT 1` and finds
the cold log start with `ORDER BY base_offset LIMIT 1`, both over committed rows only. With
the plain (topic_id, partition, base_offset) index those probes step over every deleted and
superseded row on the way (retention leaves a growing prefix of `deleted` rows); the partial
index holds committed rows alone, so each probe is one B-tree descent however long the
partition's history is.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "cold_files_committed_by_offset",
        "cold_files",
        ["topic_id", "partition", "base_offset"],
        postgresql_where=sa.text("state = 'committed'"),
    )


def downgrade() -> None:
    op.drop_index("cold_files_committed_by_offset", table_name="cold_files")
