"""Tiering: sealed hot segments to tier, and the cold manifest (docs/design.md §4, §7).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-06

- ``hot_segments``: one row per sealed segment, registered by the partition's leader;
  ``state`` moves sealed → tiering (claimed by a worker until ``claim_expires_at``) → tiered.
  ``attempts`` counts claims and fences a stale worker; ``retry_at`` is the backoff after a
  failed attempt (an addition to the contract's columns, only the worker reads it).
- ``cold_files``: the manifest, Kafka's RemoteLogSegmentMetadata: one row per uploaded data
  file with an explicit state copy_started → copied → committed → delete_started → deleted.
  Readers only ever see ``committed`` rows, and a row becomes committed only after its Delta
  commit. ``base_offset``/``last_offset`` are the offset range the file covers (its segment).

Neither table bumps metadata_version: segments churn far more often than cluster metadata,
and no broker has to reload anything when they change.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0003"
down_revision: str | None = "0002"
branch_labels = None
depends_on = None

TSTZ = sa.DateTime(timezone=True)


def _topic_fk() -> sa.Column[str]:
    return sa.Column(
        "topic_id",
        pg.UUID(as_uuid=False),
        sa.ForeignKey("topics.id", ondelete="CASCADE"),
        nullable=False,
    )


def upgrade() -> None:
    op.create_table(
        "hot_segments",
        _topic_fk(),
        sa.Column("partition", sa.Integer, nullable=False),
        sa.Column("base_offset", sa.BigInteger, nullable=False),
        sa.Column("end_offset", sa.BigInteger, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("sealed_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("state", sa.Text, nullable=False, server_default="sealed"),
        sa.Column("claimed_by", sa.Text),
        sa.Column("claim_expires_at", TSTZ),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text),
        sa.Column("retry_at", TSTZ),
        sa.PrimaryKeyConstraint("topic_id", "partition", "base_offset"),
        sa.CheckConstraint(
            "state IN ('sealed', 'tiering', 'tiered')", name="hot_segments_state_valid"
        ),
        sa.CheckConstraint("end_offset > base_offset", name="hot_segments_range_nonempty"),
        sa.CheckConstraint("size_bytes >= 0", name="hot_segments_size_nonnegative"),
    )
    # The claim query scans only untiered rows: keep that part of the table small to search.
    op.create_index(
        "hot_segments_untiered",
        "hot_segments",
        ["topic_id", "partition", "base_offset"],
        postgresql_where=sa.text("state <> 'tiered'"),
    )
    op.create_table(
        "cold_files",
        sa.Column("id", sa.BigInteger, primary_key=True),  # bigserial
        _topic_fk(),
        sa.Column("partition", sa.Integer, nullable=False),
        sa.Column("base_offset", sa.BigInteger, nullable=False),
        sa.Column("last_offset", sa.BigInteger, nullable=False),
        sa.Column("min_timestamp", sa.BigInteger, nullable=False),
        sa.Column("max_timestamp", sa.BigInteger, nullable=False),
        sa.Column("object_key", sa.Text, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("records", sa.BigInteger, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("delta_version", sa.BigInteger),
        sa.Column("created_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("delete_after", TSTZ),
        sa.UniqueConstraint("object_key", name="cold_files_object_key_key"),
        sa.CheckConstraint(
            "state IN ('copy_started', 'copied', 'committed', 'delete_started', 'deleted')",
            name="cold_files_state_valid",
        ),
        sa.CheckConstraint("last_offset >= base_offset", name="cold_files_range_valid"),
        sa.CheckConstraint(
            "state <> 'committed' OR delta_version IS NOT NULL",
            name="cold_files_committed_has_version",
        ),
    )
    op.create_index("cold_files_by_offset", "cold_files", ["topic_id", "partition", "base_offset"])


def downgrade() -> None:
    op.drop_table("cold_files")
    op.drop_table("hot_segments")
