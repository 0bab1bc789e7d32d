"""The Schema Registry (registry/): schemas under global ids, subjects' versions, settings.

Revision ID: 0010
Revises: 0009
Create Date: 2027-02-01

- ``registry_schemas``: one row per global id, never updated nor deleted, so an id always
  names the same schema and is never reused. ``identity`` (a hash of type, normalized text
  and references) finds the id of a schema already known; ids come from
  ``registry_schema_ids`` (IMPORT mode may name its own, and moves the sequence past it).
- ``registry_versions``: a subject's versions (1, 2, ...); ``deleted`` is a soft delete, a
  hard delete removes the row. A subject exists while it has rows.
- ``registry_settings``: compatibility level and mode, per subject or global (subject '').
- ``acls.resource_type`` also takes ``subject`` (the registry's ACL resource).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels = None
depends_on = None

_TYPES_BEFORE = "resource_type IN ('topic', 'group', 'cluster')"
_TYPES_AFTER = "resource_type IN ('topic', 'group', 'cluster', 'subject')"


def upgrade() -> None:
    now = sa.func.now()
    op.execute("CREATE SEQUENCE registry_schema_ids START 1")
    op.create_table(
        "registry_schemas",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("schema_type", sa.Text, nullable=False),
        sa.Column("schema_text", sa.Text, nullable=False),
        sa.Column("refs", sa.dialects.postgresql.JSONB, nullable=False),
        sa.Column("identity", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.CheckConstraint("id > 0", name="registry_schemas_id_positive"),
    )
    op.create_index("registry_schemas_by_identity", "registry_schemas", ["identity"])
    op.create_table(
        "registry_versions",
        sa.Column("subject", sa.Text, primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("schema_id", sa.Integer, sa.ForeignKey("registry_schemas.id"), nullable=False),
        sa.Column("deleted", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.CheckConstraint("version > 0", name="registry_versions_version_positive"),
    )
    op.create_index("registry_versions_by_schema", "registry_versions", ["schema_id"])
    op.create_table(
        "registry_settings",
        sa.Column("subject", sa.Text, primary_key=True),
        sa.Column("compatibility", sa.Text),
        sa.Column("mode", sa.Text),
    )
    op.drop_constraint("acls_type", "acls", type_="check")
    op.create_check_constraint("acls_type", "acls", _TYPES_AFTER)


def downgrade() -> None:
    op.execute("DELETE FROM acls WHERE resource_type = 'subject'")
    op.drop_constraint("acls_type", "acls", type_="check")
    op.create_check_constraint("acls_type", "acls", _TYPES_BEFORE)
    op.drop_table("registry_settings")
    op.drop_table("registry_versions")
    op.drop_table("registry_schemas")
    op.execute("DROP SEQUENCE registry_schema_ids")
