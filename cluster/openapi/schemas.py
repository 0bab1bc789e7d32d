"""Pieces of the OpenAPI document that several path groups share."""

from __future__ import annotations

from typing import Any

ERROR = {
    "type": "object",
    "required": ["error_code", "message"],
    "properties": {"error_code": {"type": "string"}, "message": {"type": "string"}},
}
TOPIC = {"name": "topic", "in": "path", "required": True, "schema": {"type": "string"}}
PARTITION = {"name": "partition", "in": "path", "required": True, "schema": {"type": "integer"}}


def error_responses(*codes: int) -> dict[str, Any]:
    return {
        str(c): {
            "description": "Kafka-style error",
            "content": {"application/json": {"schema": ERROR}},
        }
        for c in codes
    }


def json_response(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


CONFIGS = {
    "type": "object",
    "additionalProperties": {"type": ["string", "integer", "boolean", "null"]},
}
PARTITION_DESC = {
    "type": "object",
    "properties": {
        "partition": {"type": "integer"},
        "leader": {"type": ["integer", "null"]},
        "leader_epoch": {"type": "integer"},
        "replicas": {"type": "array", "items": {"type": "integer"}},
        "isr": {"type": "array", "items": {"type": "integer"}},
        "log_start_offset": {"type": ["integer", "null"]},
        "high_watermark": {"type": ["integer", "null"]},
        "log_end_offset": {"type": ["integer", "null"]},
        "hot": {"type": ["object", "null"]},
        "cold": {"type": ["object", "null"]},
        "tiering_lag": {"type": ["integer", "null"]},
    },
}
TOPIC_DESC = {
    "type": "object",
    "required": ["name", "configs", "partitions"],
    "properties": {
        "name": {"type": "string"},
        "id": {"type": "string"},
        "replication_factor": {"type": "integer"},
        "configs": {"type": "object"},
        "partitions": {"type": "array", "items": PARTITION_DESC},
    },
}
RECORD_IN = {
    "type": "object",
    "properties": {
        "key": {},
        "value": {},
        "key_b64": {"type": "string", "contentEncoding": "base64"},
        "value_b64": {"type": "string", "contentEncoding": "base64"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "partition": {"type": "integer", "minimum": 0},
        "timestamp": {"type": "integer", "minimum": 0},
    },
}
RECORD_OUT = {
    "type": "object",
    "required": ["offset", "timestamp"],
    "properties": {
        "offset": {"type": "integer"},
        "timestamp": {"type": "integer"},
        "key": {},
        "value": {},
        "key_b64": {"type": "string"},
        "value_b64": {"type": "string"},
        "headers": {},
    },
}
# The frames a hot fetch was read from, each CRC-32C-checked by the broker before it was
# served (a frame that fails is never served: 503 KAFKA_STORAGE_ERROR). Arrow answers carry
# the same list as JSON in the stream's schema metadata, key `tierlog.frames`. Cold reads
# (from Parquet) list none.
FRAMES_OUT = {
    "type": "array",
    "description": "Frames read, with the CRC-32C each was verified against (hot reads only; "
    "Arrow: schema metadata `tierlog.frames`). Equal on every replica of the same offsets.",
    "items": {
        "type": "object",
        "required": ["base_offset", "last_offset", "crc32c"],
        "properties": {
            "base_offset": {"type": "integer"},
            "last_offset": {"type": "integer"},
            "crc32c": {"type": "integer", "minimum": 0},
        },
    },
}

# -- consumer groups (groups/routes.py, mounted by the composition root) -------------


def json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}
