"""The erasure paths of the OpenAPI document (ingest/api/erasures.py, issue 31)."""

from __future__ import annotations

from typing import Any

from cluster.openapi.schemas import TOPIC, error_responses, json_body, json_response

_STRINGS = {"type": "array", "items": {"type": "string"}, "maxItems": 10_000}
_REQUEST = {
    "type": "object",
    "description": "1 to 10,000 keys in all: text keys (UTF-8) and/or binary ones as base64",
    "properties": {
        "keys": _STRINGS,
        "keys_b64": {**_STRINGS, "items": {"type": "string", "contentEncoding": "base64"}},
    },
    "additionalProperties": False,
}
_ERASURE = {
    "type": "object",
    "required": ["id", "topic", "state"],
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "topic": {"type": "string"},
        "state": {"type": "string", "enum": ["pending", "running", "done", "failed"]},
        "error": {"type": ["string", "null"], "description": "why it failed"},
        "requested_by": {"type": "string", "description": "the principal who asked"},
        "requested_at": {"type": "string", "format": "date-time"},
        "started_at": {"type": ["string", "null"], "format": "date-time"},
        "finished_at": {"type": ["string", "null"], "format": "date-time"},
        "keys": {"type": "integer", "description": "distinct keys named (stored hashed)"},
        "end_offsets": {
            "type": "object",
            "description": "per partition, the log end offset at acceptance: records from "
            "there on are kept",
        },
        "hot": {
            "type": "object",
            "description": 'per replica ("partition/broker"): found, '
            "removed, segments and bytes rewritten",
        },
        "cold": {"type": "object", "description": "per partition: files and bytes rewritten"},
    },
}

ERASURE_PATHS: dict[str, Any] = {
    "/topics/{topic}/erasures": {
        "parameters": [TOPIC],
        "post": {
            "summary": "Erase every record with these keys from both tiers (DELETE on the topic)",
            "requestBody": json_body(_REQUEST),
            "responses": {
                "202": json_response(_ERASURE, "Accepted: pending"),
                **error_responses(400, 404, 413, 422),
            },
        },
        "get": {
            "summary": "The topic's erasure requests, newest first (the audit trail)",
            "parameters": [
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
                }
            ],
            "responses": {
                "200": json_response(
                    {"type": "object", "properties": {"erasures": {"type": "array"}}}
                ),
                **error_responses(400),
            },
        },
    },
    "/topics/{topic}/erasures/{erasure_id}": {
        "parameters": [
            TOPIC,
            {"name": "erasure_id", "in": "path", "required": True, "schema": {"type": "string"}},
        ],
        "get": {
            "summary": "One erasure request: state, who, when, per-tier results",
            "responses": {"200": json_response(_ERASURE), **error_responses(404)},
        },
    },
}
