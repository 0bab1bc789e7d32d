"""Schema types and Confluent's wire format, as a library every role may use: the registry
(registry/) to parse and check schemas, tiering to type lake columns, the CLI and the console
to decode values.

- base.py: the protocol each schema type implements (parse, normalize, compatibility)
- one module per type: avro.py, jsonschema.py (its rules in jsonschema_*.py), protobuf.py
  (protobuf_text.py writes descriptors back as .proto, protobuf_diff/_messages.py its rules)
- kinds.py: the types by name; wire.py: Confluent's wire format and values decoded to JSON;
  registry_client.py: a client of the registry's REST API (the CLI's)
"""
