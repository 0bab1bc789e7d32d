"""The log start DeleteRecords set, per partition, across both tiers.

Revision ID: 0016_log_starts
Revises: 0015_segment_wakeups
Create Date: 2026-11-29

Kafka's DeleteRecords moves a partition's log start; on a tiered topic that start is
cross-tier (records below it are gone from the cold tier too), so it must outlive the leader
that took the request: it lives here. Cold reads refuse offsets below it, every replica
raises its hot log start to it, and the compaction worker removes the cold files wholly below
it. A change NOTIFYs `tierlog_cold_files` with `topic_id:partition`, as a cold file's commit
or removal does (0015), so brokers read that partition's manifest view again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision = "0016_log_starts"
down_revision: str | None = "0015_segment_wakeups"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "partition_log_starts",
        sa.Column(
            "topic_id",
            UUID(as_uuid=False),
            sa.ForeignKey("topics.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("log_start_offset", sa.BigInteger, nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint("log_start_offset >= 0", name="partition_log_starts_not_negative"),
    )
    op.execute(
        "CREATE TRIGGER partition_log_start_moved"
        " AFTER INSERT OR UPDATE OF log_start_offset ON partition_log_starts FOR EACH ROW"
        " EXECUTE FUNCTION tierlog_cold_files_changed()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER partition_log_start_moved ON partition_log_starts")
    op.drop_table("partition_log_starts")
