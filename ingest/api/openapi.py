"""The OpenAPI 3.1 document served at /openapi.json (and driven by the schemathesis test)."""

from __future__ import annotations

from typing import Any

_ERROR = {
    "type": "object",
    "required": ["error_code", "message"],
    "properties": {"error_code": {"type": "string"}, "message": {"type": "string"}},
}
_TOPIC = {"name": "topic", "in": "path", "required": True, "schema": {"type": "string"}}
_PARTITION = {"name": "partition", "in": "path", "required": True, "schema": {"type": "integer"}}


def _errors(*codes: int) -> dict[str, Any]:
    return {
        str(c): {
            "description": "Kafka-style error",
            "content": {"application/json": {"schema": _ERROR}},
        }
        for c in codes
    }


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_CONFIGS = {
    "type": "object",
    "additionalProperties": {"type": ["string", "integer", "boolean", "null"]},
}
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
        "log_end_offset": {"type": ["integer", "null"]},
        "hot": {"type": ["object", "null"]},
        "cold": {"type": ["object", "null"]},
        "tiering_lag": {"type": ["integer", "null"]},
    },
}
_TOPIC_DESC = {
    "type": "object",
    "required": ["name", "configs", "partitions"],
    "properties": {
        "name": {"type": "string"},
        "id": {"type": "string"},
        "replication_factor": {"type": "integer"},
        "configs": {"type": "object"},
        "partitions": {"type": "array", "items": _PARTITION_DESC},
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

# -- consumer groups (fetch/groups/routes.py, mounted by the composition root) -------------
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
        "assignment": _ASSIGNMENT,
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
    },
}
_OFFSETS_OUT = {
    "type": "object",
    "required": ["offsets"],
    "properties": {"offsets": {"type": "array", "items": _OFFSET_OUT}},
}
_ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky"]


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


_GROUP_PATHS: dict[str, Any] = {
    "/groups": {
        "get": {"summary": "List consumer groups", "responses": {"200": _json({"type": "object"})}}
    },
    "/groups/{group}": {
        "parameters": [_GROUP],
        "get": {
            "summary": "Describe a group: members, assignment, committed offsets and lag",
            "responses": {"200": _json({"type": "object"}), **_errors(400, 404)},
        },
    },
    "/groups/{group}/members": {
        "parameters": [_GROUP],
        "post": {
            "summary": "Join: the server assigns partitions (KIP-848), reconciled by heartbeats",
            "requestBody": _body(
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
            "responses": {"200": _json(_ASSIGNED), **_errors(400, 409, 413, 503)},
        },
    },
    "/groups/{group}/members/{member}/heartbeat": {
        "parameters": [_GROUP, _MEMBER],
        "post": {
            "summary": "Heartbeat: report owned partitions, get those to own now",
            "requestBody": _body(
                {
                    "type": "object",
                    "required": ["member_epoch"],
                    "properties": {
                        "member_epoch": {"type": "integer", "minimum": 0},
                        "owned": _ASSIGNMENT,
                        "topics": {"type": "array", "items": {"type": "string"}},
                    },
                }
            ),
            "responses": {"200": _json(_ASSIGNED), **_errors(400, 409, 413, 503)},
        },
    },
    "/groups/{group}/members/{member}": {
        "parameters": [_GROUP, _MEMBER],
        "delete": {
            "summary": "Leave the group",
            "responses": {"200": _json({"type": "object"}), **_errors(400, 409, 503)},
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
            "responses": {"200": _json(_OFFSETS_OUT), **_errors(400, 503)},
        },
        "post": {
            "summary": "Commit offsets, fenced by the member epoch",
            "requestBody": _body(
                {
                    "type": "object",
                    "required": ["offsets"],
                    "properties": {
                        "member_id": {"type": ["string", "null"]},
                        "member_epoch": {"type": "integer"},
                        "offsets": {"type": "array", "items": _OFFSET_IN},
                    },
                }
            ),
            "responses": {
                "200": _json({"type": "object"}),
                **_errors(400, 404, 409, 413, 503),
            },
        },
    },
    "/groups/{group}/offsets/reset": {
        "parameters": [_GROUP],
        "post": {
            "summary": "Reset offsets (admin) while the group has no members",
            "requestBody": _body(
                {
                    "type": "object",
                    "properties": {
                        "at": {
                            "oneOf": [
                                {"type": "string", "enum": ["earliest", "latest"]},
                                {"type": "integer", "minimum": 0},
                            ]
                        },
                        "offsets": {"type": "array", "items": _OFFSET_IN},
                        "topics": {"type": "array", "items": {"type": "string"}},
                        "partitions": {"type": "array", "items": _TOPIC_PARTITION},
                        "dry_run": {"type": "boolean"},
                    },
                }
            ),
            "responses": {
                "200": _json({"type": "object"}),
                **_errors(400, 404, 409, 413, 503),
            },
        },
    },
}

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "tierlog",
        "version": "0.1.0",
        "description": "A Kafka-style commit log whose history lives in object storage.",
    },
    "paths": {
        "/topics": {
            "get": {"summary": "List topics", "responses": {"200": _json({"type": "object"})}},
            "post": {
                "summary": "Create a topic",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "partitions": {"type": "integer"},
                                    "replication_factor": {"type": "integer"},
                                    "configs": _CONFIGS,
                                },
                            }
                        }
                    },
                },
                "responses": {"201": _json(_TOPIC_DESC, "Created"), **_errors(400, 409, 413)},
            },
        },
        "/topics/{topic}": {
            "parameters": [_TOPIC],
            "get": {
                "summary": "Describe a topic",
                "responses": {"200": _json(_TOPIC_DESC), **_errors(404)},
            },
            "delete": {
                "summary": "Delete a topic",
                "responses": {"200": _json({"type": "object"}), **_errors(404)},
            },
        },
        "/topics/{topic}/configs": {
            "parameters": [_TOPIC],
            "patch": {
                "summary": "Alter configs: a value sets a config, null restores its default",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"type": "object", "properties": {"configs": _CONFIGS}}
                        }
                    },
                },
                "responses": {"200": _json(_TOPIC_DESC), **_errors(400, 404)},
            },
        },
        "/topics/{topic}/partitions": {
            "parameters": [_TOPIC],
            "post": {
                "summary": "Grow the topic to a new total number of partitions",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["partitions"],
                                "properties": {"partitions": {"type": "integer"}},
                            }
                        }
                    },
                },
                "responses": {"200": _json(_TOPIC_DESC), **_errors(400, 404)},
            },
        },
        "/topics/{topic}/records": {
            "parameters": [_TOPIC],
            "post": {
                "summary": "Produce records",
                "parameters": [
                    {
                        "name": "acks",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["all", "1", "0", "-1"]},
                    },
                    *(
                        {
                            "name": name,
                            "in": "header",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 0},
                        }
                        for name in (
                            "X-Tierlog-Producer-Id",
                            "X-Tierlog-Producer-Epoch",
                            "X-Tierlog-Sequence",
                        )
                    ),
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["records"],
                                "properties": {"records": {"type": "array", "items": _RECORD_IN}},
                            }
                        },
                        "application/vnd.apache.arrow.stream": {
                            "schema": {"type": "string", "format": "binary"}
                        },
                    },
                },
                "responses": {
                    "200": _json({"type": "object"}),
                    **_errors(400, 404, 408, 413, 415, 429, 503),  # 408/429: api/limits.py
                },
            },
        },
        "/topics/{topic}/partitions/{partition}/records": {
            "parameters": [_TOPIC, _PARTITION],
            "get": {
                "summary": "Fetch records from an offset",
                "parameters": [
                    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                    {
                        "name": "max_records",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1},
                    },
                    {
                        "name": "max_bytes",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1},
                    },
                    {
                        "name": "wait_ms",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 0, "maximum": 30000},
                    },
                    {
                        "name": "value_format",
                        "in": "query",
                        "schema": {"type": "string", "enum": ["auto", "base64", "string"]},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "Records",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "records": {"type": "array", "items": _RECORD_OUT},
                                        "next_offset": {"type": "integer"},
                                        "high_watermark": {"type": "integer"},
                                        "log_start_offset": {"type": "integer"},
                                    },
                                }
                            },
                            "application/vnd.apache.arrow.stream": {
                                "schema": {"type": "string", "format": "binary"}
                            },
                        },
                    },
                    **_errors(400, 404, 416, 429, 503),  # 429: consumer quota
                },
            },
        },
        "/topics/{topic}/partitions/{partition}/offsets": {
            "parameters": [_TOPIC, _PARTITION],
            "get": {
                "summary": "Earliest, latest, or first offset at/after a timestamp (ms)",
                "parameters": [{"name": "at", "in": "query", "schema": {"type": "string"}}],
                "responses": {"200": _json({"type": "object"}), **_errors(400, 404)},
            },
        },
        "/producers": {
            "post": {
                "summary": "A new idempotent producer id (Kafka's InitProducerId)",
                "responses": {"201": _json({"type": "object", "required": ["producer_id"]})},
            },
        },
        "/healthz": {
            "get": {"summary": "Liveness", "responses": {"200": _json({"type": "object"})}}
        },
        "/readyz": {
            "get": {
                "summary": "Readiness",
                "responses": {
                    "200": _json({"type": "object"}),
                    "503": _json({"type": "object"}, "Starting"),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "responses": {
                    "200": {
                        "description": "text exposition format",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/brokers": {
            "get": {
                "summary": "Brokers of the cluster",
                "responses": {"200": _json({"type": "object"})},
            }
        },
        **_GROUP_PATHS,
    },
}

# API keys (ingest/api/auth.py): every path needs one unless auth is off, but the open ones.
OPENAPI["components"] = {
    "securitySchemes": {
        "apiKey": {
            "type": "http",
            "scheme": "bearer",
            "description": "tlk_<id>_<secret>, made by `tierlog users create`",
        }
    }
}
OPENAPI["security"] = [{"apiKey": []}]
for _open in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
    for _op in OPENAPI["paths"].get(_open, {}).values():
        _op["security"] = []
