"""Cluster metadata in Postgres: brokers, controller lease, topics, partitions, configs.

SQLAlchemy 2 Core over psycopg 3; schema changes go through Alembic (metadata/migrations).
No SQL lives outside this package: other packages use the repositories here.
"""
