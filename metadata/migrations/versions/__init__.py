"""Alembic revisions (file names start with a letter so they are importable modules)."""
