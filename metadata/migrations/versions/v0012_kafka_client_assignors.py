"""Kafka client-side assignment: the classic protocol's round and each client's protocols.

Revision ID: 0012_kafka_client_assignors
Revises: 0011
Create Date: 2026-11-28

- ``consumer_groups.kafka``: the group's client-assigned round (generation, phase, leader,
  protocol, members, deadline) when its members are all Kafka clients.
- ``group_members.kafka``: a Kafka client's protocols (name, metadata) and the assignment
  its leader gave it; NULL for HTTP members.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0012_kafka_client_assignors"
down_revision: str | None = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("consumer_groups", sa.Column("kafka", JSONB))
    op.add_column("group_members", sa.Column("kafka", JSONB))


def downgrade() -> None:
    op.drop_column("group_members", "kafka")
    op.drop_column("consumer_groups", "kafka")
