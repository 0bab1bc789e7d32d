"""Consumer groups (KIP-848 style): groups, their members, committed offsets (docs/design.md §5,
§7).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-13

- ``consumer_groups``: one row per group. ``group_epoch`` moves on every change of membership,
  subscriptions or subscribed topics' partitions; the row is locked ``FOR UPDATE`` by every
  change, and each write is a compare-and-set on the epoch it read. ``assignor`` is the
  server-side assignor the group uses now; ``subscribed`` records the topic ids and partition
  counts the current target assignment was computed on, so a topic change is noticed.
- ``group_members``: ``target`` is the member's share of the target assignment, ``assigned``
  what the server last told the member it may own (its member epoch moves when that changes),
  ``owned`` what the member last reported owning. Assignments are JSON ``{"topic": [p, …]}``.
- ``group_offsets``: committed offsets by topic id, so deleting a topic deletes its offsets and a
  re-created topic starts with none.

No table bumps metadata_version: brokers cache no group state.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0004"
down_revision: str | None = "0003"
branch_labels = None
depends_on = None

TSTZ = sa.DateTime(timezone=True)
EMPTY_OBJECT = sa.text("'{}'::jsonb")


def upgrade() -> None:
    op.create_table(
        "consumer_groups",
        sa.Column("id", sa.BigInteger, primary_key=True),  # bigserial
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("group_epoch", sa.Integer, nullable=False, server_default="0"),
        sa.Column("assignor", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False, server_default="empty"),
        sa.Column("subscribed", pg.JSONB, nullable=False, server_default=EMPTY_OBJECT),
        sa.Column("created_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("name", name="consumer_groups_name_key"),
        sa.CheckConstraint(
            "state IN ('empty', 'reconciling', 'stable')", name="consumer_groups_state_valid"
        ),
        sa.CheckConstraint("group_epoch >= 0", name="consumer_groups_epoch_nonnegative"),
    )
    op.create_table(
        "group_members",
        sa.Column(
            "group_id",
            sa.BigInteger,
            sa.ForeignKey("consumer_groups.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("member_id", sa.Text, nullable=False),
        sa.Column("member_epoch", sa.Integer, nullable=False),
        sa.Column("topics", pg.ARRAY(sa.Text), nullable=False),
        sa.Column("assignor", sa.Text),
        sa.Column("session_timeout_ms", sa.Integer, nullable=False),
        sa.Column("joined_at", TSTZ, nullable=False),
        sa.Column("last_heartbeat_at", TSTZ, nullable=False),
        sa.Column("session_expires_at", TSTZ, nullable=False),
        sa.Column("target", pg.JSONB, nullable=False, server_default=EMPTY_OBJECT),
        sa.Column("assigned", pg.JSONB, nullable=False, server_default=EMPTY_OBJECT),
        sa.Column("owned", pg.JSONB, nullable=False, server_default=EMPTY_OBJECT),
        sa.PrimaryKeyConstraint("group_id", "member_id"),
        sa.CheckConstraint("member_epoch >= 1", name="group_members_epoch_positive"),
        sa.CheckConstraint("session_timeout_ms > 0", name="group_members_session_positive"),
    )
    # The expiry sweep looks for lapsed sessions across all groups.
    op.create_index("group_members_by_expiry", "group_members", ["session_expires_at"])
    op.create_table(
        "group_offsets",
        sa.Column(
            "group_id",
            sa.BigInteger,
            sa.ForeignKey("consumer_groups.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "topic_id",
            pg.UUID(as_uuid=False),
            sa.ForeignKey("topics.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("partition", sa.Integer, nullable=False),
        sa.Column("committed_offset", sa.BigInteger, nullable=False),
        sa.Column("metadata", sa.Text),
        sa.Column("committed_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("group_id", "topic_id", "partition"),
        sa.CheckConstraint("partition >= 0", name="group_offsets_partition_nonnegative"),
        sa.CheckConstraint("committed_offset >= 0", name="group_offsets_offset_nonnegative"),
    )
    # The cascade from topics: find a topic's offsets without scanning every group's.
    op.create_index("group_offsets_by_topic", "group_offsets", ["topic_id"])


def downgrade() -> None:
    op.drop_table("group_offsets")
    op.drop_table("group_members")
    op.drop_table("consumer_groups")
