"""Record names, for the record-name subject strategies (Confluent's RecordNameStrategy:
subject = the record's full name; TopicRecordNameStrategy: `<topic>-<full name>`)."""

from __future__ import annotations

import json


def record_name(schema_type: str, text: str) -> str | None:
    """The full name of the record a schema describes, or None when it names none."""
    if schema_type != "AVRO":
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        return None
    name: str = doc["name"]
    namespace = doc.get("namespace")
    if "." in name or not isinstance(namespace, str) or not namespace:
        return name
    return f"{namespace}.{name}"
