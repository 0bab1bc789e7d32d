"""The Delta table path of the OpenAPI document (fetch/lake.py, on brokers and fetch nodes)."""

from __future__ import annotations

from typing import Any

from cluster.openapi.schemas import error_responses, json_response

_INT = {"type": "integer"}
_NULLABLE_INT = {"type": ["integer", "null"]}
_RANGE = {
    "type": "object",
    "required": ["partition", "first", "last"],
    "properties": {"partition": _INT, "first": _INT, "last": _INT},
}
_FILE = {
    "type": "object",
    "description": "a live data file, from the cold manifest (offsets inclusive)",
    "properties": {
        "path": {"type": "string", "description": "relative to the table root"},
        "partition": _INT,
        "first_offset": _INT,
        "last_offset": _INT,
        "min_timestamp": _INT,
        "max_timestamp": _INT,
        "size_bytes": _INT,
        "records": _INT,
        "delta_version": _NULLABLE_INT,
    },
}
_VERSION = {
    "type": "object",
    "description": "what one Delta log version did, read from its log entry",
    "properties": {
        "version": _INT,
        "timestamp": _NULLABLE_INT,
        "operation": {"type": ["string", "null"]},
        "files_added": _INT,
        "files_removed": _INT,
        "bytes_added": _INT,
        "bytes_removed": _INT,
        "records_added": _INT,
        "offset_ranges": {"type": "array", "items": _RANGE},
    },
}
_COLUMN = {
    "type": "object",
    "description": "a column of the table's current schema, nested fields as dotted paths",
    "properties": {
        "path": {"type": "string", "description": "e.g. value_typed.ship.city"},
        "type": {"type": "string", "description": "the Delta type"},
        "added_in": {"type": "integer", "description": "the first version that has it"},
    },
}
_LAKE = {
    "type": "object",
    "required": ["topic", "table_uri", "files", "versions"],
    "properties": {
        "topic": {"type": "string"},
        "table_uri": {"type": "string"},
        "remote_storage_enable": {"type": "boolean"},
        "version": _NULLABLE_INT,
        "files": {"type": "array", "items": _FILE},
        "partitions": {"type": "array", "items": {"type": "object"}},
        "totals": {"type": "object"},
        "columns": {"type": "array", "items": _COLUMN},
        "versions": {"type": "array", "items": _VERSION},
        "next_before": {
            "type": ["integer", "null"],
            "description": "pass as ?before= for the next (older) page of versions",
        },
    },
}

LAKE_PATHS: dict[str, Any] = {
    "/topics/{topic}/lake": {
        "parameters": [
            {"name": "topic", "in": "path", "required": True, "schema": {"type": "string"}}
        ],
        "get": {
            "summary": "The topic's Delta table: versions, live files, offset ranges",
            "description": "Versions newest first, `limit` per page (older ones with "
            "`before`); files from the cold manifest. 503 KAFKA_STORAGE_ERROR when the node "
            "has no S3 or S3 fails.",
            "parameters": [
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
                },
                {
                    "name": "before",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 0},
                },
            ],
            "responses": {"200": json_response(_LAKE), **error_responses(400, 404, 503)},
        },
    },
}
