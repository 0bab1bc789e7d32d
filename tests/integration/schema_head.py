"""The newest Alembic revision, so schema-at-head tests need no edit per migration."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from metadata.db import MIGRATIONS_DIR

HEAD = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
