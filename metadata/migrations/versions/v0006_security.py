"""Security: principals, API keys (salted scrypt hashes) and ACLs (Kafka's model).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-20

- ``principals``: ``User:<name>`` (Kafka's principal syntax), one row per user.
- ``api_keys``: a key ``tlk_<id>_<secret>`` is looked up by ``id`` (the primary key) and
  checked against ``salt`` + ``hash`` (scrypt); ``revoked_at`` set = unusable.
- ``acls``: principal (or ``User:*``), resource type topic|group|cluster, pattern type
  literal|prefixed, resource name (literal ``*`` = every resource of the type), operation,
  allow|deny. Checks keep every enum value to Kafka's names.
- A statement trigger on both key and ACL tables sends ``NOTIFY tierlog_security`` so nodes
  drop their caches at once (a TTL covers a lost notification).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels = None
depends_on = None

OPERATIONS = ("read", "write", "create", "delete", "alter", "describe", "all")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    now = sa.func.now()
    op.create_table(
        "principals",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.CheckConstraint("name ~ '^User:[^*\\s]+$'", name="principals_kafka_name"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column(
            "principal",
            sa.Text,
            sa.ForeignKey("principals.name", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("salt", sa.LargeBinary, nullable=False),
        sa.Column("hash", sa.LargeBinary, nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
    )
    op.create_index("api_keys_by_principal", "api_keys", ["principal"])
    op.create_table(
        "acls",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("principal", sa.Text, nullable=False),
        sa.Column("resource_type", sa.Text, nullable=False),
        sa.Column("pattern_type", sa.Text, nullable=False),
        sa.Column("resource_name", sa.Text, nullable=False),
        sa.Column("operation", sa.Text, nullable=False),
        sa.Column("permission", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.CheckConstraint("principal ~ '^User:\\S+$'", name="acls_principal"),
        sa.CheckConstraint(_in("resource_type", ("topic", "group", "cluster")), name="acls_type"),
        sa.CheckConstraint(_in("pattern_type", ("literal", "prefixed")), name="acls_pattern"),
        sa.CheckConstraint(_in("operation", OPERATIONS), name="acls_operation"),
        sa.CheckConstraint(_in("permission", ("allow", "deny")), name="acls_permission"),
        sa.CheckConstraint("length(resource_name) > 0", name="acls_resource_name"),
        sa.UniqueConstraint(
            "principal",
            "resource_type",
            "pattern_type",
            "resource_name",
            "operation",
            "permission",
            name="acls_unique",
        ),
    )
    op.execute(
        """
        CREATE FUNCTION tierlog_security_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('tierlog_security', '');
            RETURN NULL;
        END $$
        """
    )
    for table in ("api_keys", "acls", "principals"):
        op.execute(
            f"CREATE TRIGGER {table}_security_changed AFTER INSERT OR UPDATE OR DELETE "
            f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION tierlog_security_changed()"
        )


def downgrade() -> None:
    op.drop_table("acls")
    op.drop_table("api_keys")
    op.drop_table("principals")
    op.execute("DROP FUNCTION tierlog_security_changed()")
