"""Kafka transactions: the coordinator's state and each partition's transaction spans.

Revision ID: 0014_transactions
Revises: 0013_erasures
Create Date: 2026-11-28

- ``kafka_transactions``: per transactional id, Kafka's TransactionMetadata (producer id
  and epoch, state, timeout, start time, the partitions and the groups' pending offsets of
  the transaction under way). Any broker may act for any id (rows are locked while they
  change), so the coordinator fails over with the database, not with a broker.
- ``kafka_txn_spans``: per partition, the offsets a transaction wrote (``ongoing`` until its
  marker), the aborted ones (Kafka's ``.txnindex``) and the control records (``marker``).
  Committed spans are deleted: their records are ordinary data from then on.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0014_transactions"
down_revision: str | None = "0013_erasures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kafka_transactions",
        sa.Column("transactional_id", sa.Text, primary_key=True),
        sa.Column("producer_id", sa.BigInteger, nullable=False),
        sa.Column("producer_epoch", sa.Integer, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("timeout_ms", sa.Integer, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("partitions", JSONB, nullable=False, server_default="[]"),
        sa.Column("offsets", JSONB, nullable=False, server_default="{}"),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint(
            "state IN ('Empty', 'Ongoing', 'PrepareCommit', 'PrepareAbort', 'CompleteCommit', "
            "'CompleteAbort')",
            name="kafka_txn_state",
        ),
    )
    op.create_index("kafka_transactions_producer", "kafka_transactions", ["producer_id"])
    op.create_table(
        "kafka_txn_spans",
        sa.Column("topic", sa.Text, primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True),
        sa.Column("first_offset", sa.BigInteger, primary_key=True),
        sa.Column("last_offset", sa.BigInteger, nullable=False),
        sa.Column("producer_id", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.CheckConstraint("kind IN ('ongoing', 'aborted', 'marker')", name="kafka_txn_span_kind"),
    )


def downgrade() -> None:
    op.drop_table("kafka_txn_spans")
    op.drop_index("kafka_transactions_producer", "kafka_transactions")
    op.drop_table("kafka_transactions")
