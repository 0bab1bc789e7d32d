"""The Schema Registry: Confluent's REST API, served by every broker (mounted through
tierlog/cli/extensions.py), its state in Postgres.

- types/: one module per schema type (AVRO, JSON, PROTOBUF): parse, normalize, and the
  reader/writer compatibility rules of that type, behind the protocol in types/base.py
"""
