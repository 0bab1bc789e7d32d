"""Alembic migrations of the metadata schema; run them with metadata.db.migrate(engine)."""
