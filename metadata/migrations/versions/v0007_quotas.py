"""Client quotas: per-principal byte rates (Kafka's producer_byte_rate / consumer_byte_rate).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-20

- ``client_quotas``: one row per quota entity, ``User:<name>`` or ``<default>`` (Kafka's
  default user entity, for every principal without a value of its own). A null rate is "not
  set here": each rate resolves on its own, the principal's value first, then the default's,
  else unlimited (Kafka's per-key precedence). No foreign key to ``principals``: as in Kafka,
  a quota may be set before the user exists.
- Brokers poll the table every few seconds; it does not bump metadata_version.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "client_quotas",
        sa.Column("entity", sa.Text, primary_key=True),
        sa.Column("producer_byte_rate", sa.BigInteger),
        sa.Column("consumer_byte_rate", sa.BigInteger),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint(
            "entity = '<default>' OR entity ~ '^User:[^*\\s]+$'", name="client_quotas_entity"
        ),
        sa.CheckConstraint(
            "producer_byte_rate IS NULL OR producer_byte_rate > 0",
            name="client_quotas_producer_positive",
        ),
        sa.CheckConstraint(
            "consumer_byte_rate IS NULL OR consumer_byte_rate > 0",
            name="client_quotas_consumer_positive",
        ),
    )


def downgrade() -> None:
    op.drop_table("client_quotas")
