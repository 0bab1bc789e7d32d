"""Brokers, controller lease, topics, partitions, and the metadata version counter.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None

TSTZ = sa.DateTime(timezone=True)

# One bump (and one NOTIFY) per transaction however many rows it touches: the row remembers
# the last transaction that bumped it. Concurrent writers queue on the row lock, so versions
# are committed in increasing order.
BUMP_FUNCTION = """
CREATE FUNCTION tierlog_metadata_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v bigint;
    x bigint := pg_current_xact_id()::text::bigint;
BEGIN
    UPDATE metadata_version SET version = version + 1, last_xact = x
     WHERE id = 1 AND last_xact IS DISTINCT FROM x
    RETURNING version INTO v;
    IF FOUND THEN
        PERFORM pg_notify('tierlog_metadata', v::text);
    END IF;
    RETURN NULL;
END $$
"""

# Row triggers, so that a statement touching no row (a failed compare-and-set) bumps nothing.
# Heartbeats (brokers.lease_expires_at moving forward) and controller lease renewals
# (expires_at) are deliberately not changes: they would make every broker reload every second.
UPDATE_IS_CHANGE = {
    "topics": "OLD.* IS DISTINCT FROM NEW.*",
    "partitions": "OLD.* IS DISTINCT FROM NEW.*",
    "brokers": "OLD.url IS DISTINCT FROM NEW.url OR OLD.rack IS DISTINCT FROM NEW.rack"
    " OR OLD.incarnation <> NEW.incarnation"
    # a live lease ended (deregister), not a heartbeat moving it forward
    " OR (NEW.lease_expires_at <= now() AND OLD.lease_expires_at > now())",
    "controller": "OLD.holder IS DISTINCT FROM NEW.holder OR OLD.epoch <> NEW.epoch",
}
INSERT_DELETE_IS_CHANGE = ("topics", "partitions", "brokers")


def upgrade() -> None:
    op.create_table(
        "brokers",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("rack", sa.Text),
        sa.Column("lease_expires_at", TSTZ, nullable=False),
        sa.Column("registered_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.Column("incarnation", sa.BigInteger, nullable=False, server_default="0"),
        sa.CheckConstraint("id >= 0", name="brokers_id_nonnegative"),
    )
    op.create_table(
        "controller",
        sa.Column("id", sa.SmallInteger, primary_key=True),
        sa.Column("holder", sa.Integer),
        sa.Column("epoch", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("expires_at", TSTZ, nullable=False, server_default="-infinity"),
        sa.CheckConstraint("id = 1", name="controller_single_row"),
    )
    op.execute("INSERT INTO controller (id) VALUES (1)")
    op.create_table(
        "topics",
        sa.Column(
            "id",
            pg.UUID(as_uuid=False),
            primary_key=True,
            server_default=sa.text("gen_random_uuid()"),
        ),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("partition_count", sa.Integer, nullable=False),
        sa.Column("replication_factor", sa.Integer, nullable=False),
        sa.Column("configs", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", TSTZ, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("name", name="topics_name_key"),
        sa.CheckConstraint("partition_count >= 1", name="topics_partition_count_positive"),
        sa.CheckConstraint("replication_factor >= 1", name="topics_rf_positive"),
        sa.CheckConstraint("jsonb_typeof(configs) = 'object'", name="topics_configs_object"),
    )
    op.create_table(
        "partitions",
        sa.Column(
            "topic_id",
            pg.UUID(as_uuid=False),
            sa.ForeignKey("topics.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("partition", sa.Integer, nullable=False),
        sa.Column("leader", sa.Integer),
        sa.Column("leader_epoch", sa.Integer, nullable=False, server_default="0"),
        sa.Column("replicas", pg.ARRAY(sa.Integer), nullable=False),
        sa.Column("isr", pg.ARRAY(sa.Integer), nullable=False),
        sa.Column("partition_epoch", sa.Integer, nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("topic_id", "partition"),
        sa.CheckConstraint("partition >= 0", name="partitions_partition_nonnegative"),
    )
    op.create_table(
        "metadata_version",
        sa.Column("id", sa.SmallInteger, primary_key=True),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("last_xact", sa.BigInteger),
        sa.CheckConstraint("id = 1", name="metadata_version_single_row"),
    )
    op.execute("INSERT INTO metadata_version (id, version) VALUES (1, 0)")
    op.execute(BUMP_FUNCTION)
    for table, when in UPDATE_IS_CHANGE.items():
        op.execute(
            f"CREATE TRIGGER {table}_update_changed AFTER UPDATE ON {table} FOR EACH ROW"
            f" WHEN ({when}) EXECUTE FUNCTION tierlog_metadata_changed()"
        )
    for table in INSERT_DELETE_IS_CHANGE:
        op.execute(
            f"CREATE TRIGGER {table}_insert_delete_changed AFTER INSERT OR DELETE"
            f" ON {table} FOR EACH ROW EXECUTE FUNCTION tierlog_metadata_changed()"
        )


def downgrade() -> None:
    for table in ("partitions", "topics", "controller", "brokers", "metadata_version"):
        op.drop_table(table)
    op.execute("DROP FUNCTION tierlog_metadata_changed()")
