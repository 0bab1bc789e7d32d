"""Schema types and Confluent's wire format, as a library every role may use: the registry
(registry/) to parse and check schemas, tiering to type lake columns, the CLI and the console
to decode values.

- base.py: the protocol each schema type implements (parse, normalize, compatibility)
- one module per type: AVRO, JSON (JSON Schema), PROTOBUF
"""
