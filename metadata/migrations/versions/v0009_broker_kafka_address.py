"""Brokers register the address Kafka clients reach their Kafka listener at.

Revision ID: 0009
Revises: 0008
Create Date: 2027-01-20

- ``brokers.kafka_address``: ``HOST:PORT`` as Metadata answers it for the broker (its
  --kafka-advertised address, or its listen address), NULL when it has no Kafka listener.
  Brokers used to derive each other's Kafka addresses from their HTTP URLs, which fails
  where the two are reached under different names (compose: brokers talk HTTP over the
  container network, Kafka clients come from the host through published ports).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("brokers", sa.Column("kafka_address", sa.Text))


def downgrade() -> None:
    op.drop_column("brokers", "kafka_address")
