"""Erasure requests: erase every record with given keys from both tiers (issue 31).

Revision ID: 0013_erasures
Revises: 0012_kafka_client_assignors
Create Date: 2026-11-28

- ``erasures``: one row per request, the audit trail (metadata/erasures.py). Its keys are
  kept only as HMAC-SHA256 digests under the cluster secret, so the audit log does not
  itself hold the personal data it was asked to remove. No foreign key to ``topics``: the
  record outlives the topic. ``hot`` and ``cold`` hold per-tier results (JSON).
- ``erasure_keys``: the keys themselves, the working copy the tiers need to find records
  (row-group statistics and bloom filters compare raw keys); deleted in the transaction
  that ends the request (done or failed).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID

revision = "0013_erasures"
down_revision: str | None = "0012_kafka_client_assignors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "erasures",
        sa.Column(
            "id", UUID(as_uuid=False), primary_key=True, server_default=sa.text("gen_random_uuid()")
        ),
        sa.Column("topic_id", UUID(as_uuid=False), nullable=False),
        sa.Column("topic", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False, server_default="pending"),
        sa.Column("error", sa.Text),
        sa.Column("requested_by", sa.Text, nullable=False),
        sa.Column(
            "requested_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("key_count", sa.Integer, nullable=False),
        sa.Column("key_hashes", ARRAY(sa.LargeBinary), nullable=False),
        # The log end offset of each partition when the request was accepted: what exists
        # then is erased; a record produced with the key later is kept.
        sa.Column("end_offsets", JSONB, nullable=False, server_default="{}"),
        sa.Column("hot", JSONB, nullable=False, server_default="{}"),
        sa.Column("cold", JSONB, nullable=False, server_default="{}"),
        sa.CheckConstraint(
            "state IN ('pending', 'running', 'done', 'failed')", name="erasure_state"
        ),
    )
    op.create_index("erasures_by_topic", "erasures", ["topic", "requested_at"])
    # Every broker asks each second for the open requests: the audit rows pile up, these don't.
    op.create_index(
        "erasures_open",
        "erasures",
        ["requested_at"],
        postgresql_where=sa.text("state IN ('pending', 'running')"),
    )
    op.create_table(
        "erasure_keys",
        sa.Column(
            "erasure_id",
            UUID(as_uuid=False),
            sa.ForeignKey("erasures.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("keys", ARRAY(sa.LargeBinary), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("erasure_keys")
    op.drop_index("erasures_open", table_name="erasures")
    op.drop_index("erasures_by_topic", table_name="erasures")
    op.drop_table("erasures")
