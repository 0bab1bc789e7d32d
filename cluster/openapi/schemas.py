"""Pieces of the OpenAPI document that several path groups share: the named schemas of
``components/schemas`` (the error body and the common request and response bodies) and the
helpers that reference them with ``$ref``."""

from __future__ import annotations

from typing import Any


def ref(name: str) -> dict[str, Any]:
    """A reference to the component schema `name` (one of SCHEMAS or groups.GROUP_SCHEMAS)."""
    return {"$ref": f"#/components/schemas/{name}"}


TOPIC = {"name": "topic", "in": "path", "required": True, "schema": {"type": "string"}}
PARTITION = {"name": "partition", "in": "path", "required": True, "schema": {"type": "integer"}}
# Why a status is answered, for the codes every authenticated or writing operation shares.
_WHY = {
    401: "SASL_AUTHENTICATION_FAILED: no API key, or an invalid, unknown or revoked one "
    "(with WWW-Authenticate: Bearer)",
    403: "TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED: the ACLs refuse the key's principal; "
    "or a write refused as cross-site",
    415: "UNSUPPORTED_MEDIA_TYPE: a body of a media type the operation does not take",
    429: "THROTTLING_QUOTA_EXCEEDED (with Retry-After): a quota or request limit, or, with "
    "auth on, too many failed logins from this address or key id",
}


def error_responses(*codes: int) -> dict[str, Any]:
    return {
        str(c): {
            "description": _WHY.get(c, "Kafka-style error"),
            "content": {"application/json": {"schema": ref("Error")}},
        }
        for c in codes
    }


def json_response(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


_PARTITION_DESC = {
    "type": "object",
    "properties": {
        "partition": {"type": "integer"},
        "leader": {"type": ["integer", "null"]},
        "leader_epoch": {"type": "integer"},
        "replicas": {"type": "array", "items": {"type": "integer"}},
        "isr": {"type": "array", "items": {"type": "integer"}},
        "log_start_offset": {"type": ["integer", "null"]},
        "high_watermark": {"type": ["integer", "null"]},
        "last_stable_offset": {
            "type": ["integer", "null"],
            "description": "below it no transaction is open: the end of what read_committed "
            "readers and the Spark source read (null: unknown)",
        },
        "log_end_offset": {"type": ["integer", "null"]},
        "hot": {"type": ["object", "null"]},
        "cold": {"type": ["object", "null"]},
        "tiering_lag": {"type": ["integer", "null"]},
        "hot_bytes": {
            "type": ["integer", "null"],
            "description": "bytes of the leader's local segments (null: leader unreachable)",
        },
        "cold_bytes": {
            "type": ["integer", "null"],
            "description": "bytes of the partition's committed Parquet files in S3",
        },
        "tiering_lag_bytes": {
            "type": ["integer", "null"],
            "description": "bytes of the leader's sealed segments not yet in S3 (the active "
            "segment is tiered once it rolls)",
        },
        "tiering_lag_seconds": {
            "type": ["number", "null"],
            "description": "age of the oldest sealed segment not yet in S3 (0: none waits)",
        },
        "tiering_lag_open_records": {
            "type": ["integer", "null"],
            "description": "of tiering_lag, the records in the active segment: they wait for "
            "it to roll (segment.ms, segment.bytes), not for tiering",
        },
    },
}
_RECORD_IN = {
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
_RECORD_OUT = {
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
_FRAMES = {
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

# components/schemas of the topic, record and error documents (groups.py adds the groups').
SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": {
        "type": "object",
        "description": "Every error answer: a Kafka error code name and what went wrong.",
        "required": ["error_code", "message"],
        "properties": {"error_code": {"type": "string"}, "message": {"type": "string"}},
    },
    "Configs": {
        "type": "object",
        "additionalProperties": {"type": ["string", "integer", "boolean", "null"]},
    },
    "PartitionDescription": _PARTITION_DESC,
    "TopicDescription": {
        "type": "object",
        "required": ["name", "configs", "partitions"],
        "properties": {
            "name": {"type": "string"},
            "id": {"type": "string"},
            "replication_factor": {"type": "integer"},
            "configs": {"type": "object"},
            "partitions": {"type": "array", "items": ref("PartitionDescription")},
        },
    },
    "TopicList": {
        "type": "object",
        "required": ["topics"],
        "properties": {
            "topics": {
                "type": "array",
                "description": "the topics the caller may describe",
                "items": {
                    "type": "object",
                    "required": ["name", "partitions", "replication_factor"],
                    "properties": {
                        "name": {"type": "string"},
                        "partitions": {"type": "integer"},
                        "replication_factor": {"type": "integer"},
                    },
                },
            }
        },
    },
    "BrokerList": {
        "type": "object",
        "required": ["brokers"],
        "properties": {
            "brokers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "url", "alive", "controller"],
                    "properties": {
                        "id": {"type": "integer"},
                        "url": {"type": "string", "format": "uri"},
                        "alive": {"type": "boolean", "description": "its lease is live"},
                        "controller": {"type": "boolean"},
                    },
                },
            }
        },
    },
    "TopicCreate": {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "partitions": {"type": "integer"},
            "replication_factor": {"type": "integer"},
            "configs": ref("Configs"),
        },
    },
    "RecordIn": _RECORD_IN,
    "ProduceRequest": {
        "type": "object",
        "required": ["records"],
        "properties": {"records": {"type": "array", "items": ref("RecordIn")}},
    },
    "RecordOut": _RECORD_OUT,
    "Frames": _FRAMES,
    "FetchResponse": {
        "type": "object",
        "properties": {
            "records": {"type": "array", "items": ref("RecordOut")},
            "next_offset": {"type": "integer"},
            "high_watermark": {"type": "integer"},
            "log_start_offset": {"type": "integer"},
            "frames": ref("Frames"),
        },
    },
}
