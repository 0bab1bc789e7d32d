"""Replication: producer ids, the cluster secret, and the controller's fencing needs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29

- ``producer_ids``: a BIGINT sequence handing out idempotent-producer ids (0, 1, 2, ...;
  ``-1`` means "not idempotent" in frames). A sequence never reuses a value, even when the
  transaction that drew it rolls back, which is exactly what producer ids need.
- ``cluster``: one row with a random ``secret`` that authenticates cluster-internal HTTP
  (replication fetches, forwarding), and a ``cluster_id``. The secret is 64 hex characters
  from two ``gen_random_uuid()`` (core since PG13; pg_strong_random, ~244 random bits), so
  no pgcrypto is needed. It never changes, so the table has no metadata_version trigger.

The partitions/controller triggers of 0001 already bump metadata_version and NOTIFY on every
leader, ISR or epoch change and on every controller change, which is all replication needs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0002"
down_revision: str | None = "0001"
branch_labels = None
depends_on = None

SECRET_SQL = "replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')"  # 64 hex chars


def upgrade() -> None:
    op.execute("CREATE SEQUENCE producer_ids AS bigint MINVALUE 0 START WITH 0 NO CYCLE")
    op.create_table(
        "cluster",
        sa.Column("id", sa.SmallInteger, primary_key=True),
        sa.Column(
            "cluster_id",
            pg.UUID(as_uuid=False),
            nullable=False,
            server_default=sa.text("gen_random_uuid()"),
        ),
        sa.Column("secret", sa.Text, nullable=False, server_default=sa.text(SECRET_SQL)),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint("id = 1", name="cluster_single_row"),
        sa.CheckConstraint("length(secret) >= 32", name="cluster_secret_long_enough"),
    )
    op.execute("INSERT INTO cluster (id) VALUES (1)")
    # The invariants every writer keeps, checked by the database as a last line of defence.
    op.create_check_constraint("partitions_isr_within_replicas", "partitions", "replicas @> isr")
    op.create_check_constraint(
        "partitions_leader_in_isr", "partitions", "leader IS NULL OR leader = ANY(isr)"
    )


def downgrade() -> None:
    op.drop_constraint("partitions_leader_in_isr", "partitions", type_="check")
    op.drop_constraint("partitions_isr_within_replicas", "partitions", type_="check")
    op.drop_table("cluster")
    op.execute("DROP SEQUENCE producer_ids")
