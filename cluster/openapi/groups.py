"""The consumer group paths of the OpenAPI document (groups/, on brokers and fetch nodes)."""

from __future__ import annotations

from typing import Any

from cluster.openapi.schemas import error_responses, json_body, json_response, ref

_GROUP = {"name": "group", "in": "path", "required": True, "schema": {"type": "string"}}
_MEMBER = {"name": "member", "in": "path", "required": True, "schema": {"type": "string"}}
_ASSIGNMENT = {
    "type": "object",
    "description": '{"topic": [partition, ...]}',
    "additionalProperties": {"type": "array", "items": {"type": "integer", "minimum": 0}},
}
_ASSIGNED = {
    "type": "object",
    "required": ["member_epoch", "heartbeat_interval_ms", "assignment"],
    "properties": {
        "member_id": {"type": "string"},
        "member_epoch": {"type": "integer"},
        "heartbeat_interval_ms": {"type": "integer"},
        "assignment": ref("Assignment"),
    },
}
_TOPIC_PARTITION = {
    "type": "object",
    "required": ["topic", "partition"],
    "properties": {"topic": {"type": "string"}, "partition": {"type": "integer", "minimum": 0}},
}
_OFFSET_IN = {
    "type": "object",
    "required": ["topic", "partition", "offset"],
    "properties": {
        "topic": {"type": "string"},
        "partition": {"type": "integer", "minimum": 0},
        "offset": {"type": "integer", "minimum": 0},
        "metadata": {"type": ["string", "null"]},
    },
}
_OFFSET_OUT = {
    "type": "object",
    "required": ["topic", "partition", "offset", "lag"],
    "properties": {
        "topic": {"type": "string"},
        "partition": {"type": "integer"},
        "offset": {"type": ["integer", "null"], "description": "null: nothing committed"},
        "metadata": {"type": ["string", "null"]},
        "committed_at": {"type": ["string", "null"]},
        "high_watermark": {"type": ["integer", "null"]},
        "lag": {"type": ["integer", "null"]},
        "lag_ms": {
            "type": ["integer", "null"],
            "description": "describe only: age of the oldest unconsumed record (0: caught up)",
        },
    },
}
_OFFSETS_OUT = {
    "type": "object",
    "required": ["offsets"],
    "properties": {"offsets": {"type": "array", "items": ref("CommittedOffset")}},
}
_ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky"]
# components/schemas of the group documents (document.py merges them with schemas.SCHEMAS).
GROUP_SCHEMAS: dict[str, dict[str, Any]] = {
    "Assignment": _ASSIGNMENT,
    "Assigned": _ASSIGNED,
    "TopicPartition": _TOPIC_PARTITION,
    "OffsetCommit": _OFFSET_IN,
    "CommittedOffset": _OFFSET_OUT,
    "CommittedOffsets": _OFFSETS_OUT,
}


GROUP_PATHS: dict[str, Any] = {
    "/groups": {
        "get": {
            "summary": "List consumer groups",
            "responses": {"200": json_response({"type": "object"})},
        }
    },
    "/groups/{group}": {
        "parameters": [_GROUP],
        "get": {
            "summary": "Describe a group: members, assignment, committed offsets and lag",
            "description": "Each offset carries lag in records and lag_ms, the age of the "
            "oldest unconsumed record (now minus the timestamp of the record at the committed "
            "offset; 0 when caught up); the group's lag_ms is the largest.",
            "responses": {
                "200": json_response(
                    {
                        "type": "object",
                        "properties": {
                            "members": {"type": "array", "items": {"type": "object"}},
                            "offsets": {"type": "array", "items": ref("CommittedOffset")},
                            "lag": {"type": ["integer", "null"]},
                            "lag_ms": {"type": ["integer", "null"]},
                        },
                    }
                ),
                **error_responses(400, 404),
            },
        },
        "delete": {
            "summary": "Delete an empty group and its committed offsets (Kafka's DeleteGroups)",
            "responses": {
                "200": json_response({"type": "object", "required": ["deleted"]}),
                **error_responses(400, 404, 409, 503),
            },
        },
    },
    "/groups/{group}/members": {
        "parameters": [_GROUP],
        "post": {
            "summary": "Join: the server assigns partitions (KIP-848), reconciled by heartbeats",
            "requestBody": json_body(
                {
                    "type": "object",
                    "required": ["topics"],
                    "properties": {
                        "topics": {"type": "array", "items": {"type": "string"}},
                        "assignor": {"type": "string", "enum": _ASSIGNORS},
                        "session_timeout_ms": {"type": "integer"},
                    },
                }
            ),
            "responses": {
                "200": json_response(ref("Assigned")),
                **error_responses(400, 409, 413, 503),
            },
        },
    },
    "/groups/{group}/members/{member}/heartbeat": {
        "parameters": [_GROUP, _MEMBER],
        "post": {
            "summary": "Heartbeat: report owned partitions, get those to own now",
            "requestBody": json_body(
                {
                    "type": "object",
                    "required": ["member_epoch"],
                    "properties": {
                        "member_epoch": {"type": "integer", "minimum": 0},
                        "owned": ref("Assignment"),
                        "topics": {"type": "array", "items": {"type": "string"}},
                    },
                }
            ),
            "responses": {
                "200": json_response(ref("Assigned")),
                **error_responses(400, 409, 413, 503),
            },
        },
    },
    "/groups/{group}/members/{member}": {
        "parameters": [_GROUP, _MEMBER],
        "delete": {
            "summary": "Leave the group",
            "responses": {
                "200": json_response({"type": "object"}),
                **error_responses(400, 409, 503),
            },
        },
    },
    "/groups/{group}/offsets": {
        "parameters": [_GROUP],
        "get": {
            "summary": "Committed offsets with lag (offset null: nothing committed)",
            "parameters": [
                {
                    "name": "topic",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "array", "items": {"type": "string"}},
                    "style": "form",
                    "explode": True,
                }
            ],
            "responses": {
                "200": json_response(ref("CommittedOffsets")),
                **error_responses(400, 503),
            },
        },
        "post": {
            "summary": "Commit offsets, fenced by the member epoch",
            "requestBody": json_body(
                {
                    "type": "object",
                    "required": ["offsets"],
                    "properties": {
                        "member_id": {"type": ["string", "null"]},
                        "member_epoch": {"type": "integer"},
                        "offsets": {"type": "array", "items": ref("OffsetCommit")},
                    },
                }
            ),
            "responses": {
                "200": json_response({"type": "object"}),
                **error_responses(400, 404, 409, 413, 503),
            },
        },
    },
    "/groups/{group}/offsets/reset": {
        "parameters": [_GROUP],
        "post": {
            "summary": "Reset offsets (admin) while the group has no members",
            "requestBody": json_body(
                {
                    "type": "object",
                    "properties": {
                        "at": {
                            "oneOf": [
                                {"type": "string", "enum": ["earliest", "latest"]},
                                {"type": "integer", "minimum": 0},
                            ]
                        },
                        "offsets": {"type": "array", "items": ref("OffsetCommit")},
                        "topics": {"type": "array", "items": {"type": "string"}},
                        "partitions": {"type": "array", "items": ref("TopicPartition")},
                        "dry_run": {"type": "boolean"},
                    },
                }
            ),
            "responses": {
                "200": json_response({"type": "object"}),
                **error_responses(400, 404, 409, 413, 503),
            },
        },
    },
}
