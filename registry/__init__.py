"""The Schema Registry: Confluent's REST API, served by every broker (mounted through
tierlog/cli/extensions.py), its state in Postgres. The schema types themselves (parse,
normalize, compatibility) are the library `schemaformat/`.
"""
