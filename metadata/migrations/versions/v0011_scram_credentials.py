"""SCRAM credentials of API keys, for the Kafka listener's SASL/SCRAM-SHA-256 and -512.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27

- ``scram_credentials``: per API key and mechanism, what Kafka stores for a SCRAM user
  (salt, StoredKey, ServerKey, iterations; RFC 5802), derived from the key itself as the
  password, so neither the key nor anything that logs in with it is stored. Removed with
  its key; a revoked key's credentials fail with it (the lookup joins ``api_keys``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scram_credentials",
        sa.Column(
            "key_id",
            sa.Text,
            sa.ForeignKey("api_keys.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("mechanism", sa.Text, primary_key=True),
        sa.Column("salt", sa.LargeBinary, nullable=False),
        sa.Column("stored_key", sa.LargeBinary, nullable=False),
        sa.Column("server_key", sa.LargeBinary, nullable=False),
        sa.Column("iterations", sa.Integer, nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint(
            "mechanism IN ('SCRAM-SHA-256', 'SCRAM-SHA-512')", name="scram_mechanism"
        ),
        sa.CheckConstraint("iterations >= 4096", name="scram_iterations"),
    )


def downgrade() -> None:
    op.drop_table("scram_credentials")
