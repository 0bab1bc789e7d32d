"""The OpenAPI 3.1 document served at /openapi.json (and driven by the schemathesis test)."""

from __future__ import annotations

from typing import Any

from cluster.openapi.erasures import ERASURE_PATHS
from cluster.openapi.groups import GROUP_PATHS, GROUP_SCHEMAS
from cluster.openapi.lake import LAKE_PATHS
from cluster.openapi.schemas import (
    PARTITION,
    SCHEMAS,
    TOPIC,
    error_responses,
    json_body,
    json_response,
    ref,
)
from cluster.openapi.search import SEARCH_PATHS
from cluster.openapi.security import SECURITY_PATHS

TOPIC_DESC = ref("TopicDescription")

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "tierlog",
        "version": "0.1.0",
        "description": "A Kafka-style commit log whose history lives in object storage.",
    },
    "paths": {
        "/topics": {
            "get": {
                "summary": "List topics",
                "responses": {"200": json_response(ref("TopicList"))},
            },
            "post": {
                "summary": "Create a topic",
                "requestBody": json_body(ref("TopicCreate")),
                "responses": {
                    "201": json_response(TOPIC_DESC, "Created"),
                    **error_responses(400, 409, 413),
                },
            },
        },
        "/topics/{topic}": {
            "parameters": [TOPIC],
            "get": {
                "summary": "Describe a topic",
                "responses": {"200": json_response(TOPIC_DESC), **error_responses(404)},
            },
            "delete": {
                "summary": "Delete a topic",
                "responses": {"200": json_response({"type": "object"}), **error_responses(404)},
            },
        },
        "/topics/{topic}/configs": {
            "parameters": [TOPIC],
            "patch": {
                "summary": "Alter configs: a value sets a config, null restores its default",
                "requestBody": json_body(
                    {"type": "object", "properties": {"configs": ref("Configs")}}
                ),
                "responses": {"200": json_response(TOPIC_DESC), **error_responses(400, 404)},
            },
        },
        "/topics/{topic}/partitions": {
            "parameters": [TOPIC],
            "post": {
                "summary": "Grow the topic to a new total number of partitions",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "required": ["partitions"],
                        "properties": {"partitions": {"type": "integer"}},
                    }
                ),
                "responses": {"200": json_response(TOPIC_DESC), **error_responses(400, 404)},
            },
        },
        "/topics/{topic}/records": {
            "parameters": [TOPIC],
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
                        "application/json": {"schema": ref("ProduceRequest")},
                        "application/vnd.apache.arrow.stream": {
                            "schema": {"type": "string", "format": "binary"}
                        },
                    },
                },
                "responses": {
                    "200": json_response({"type": "object"}),
                    **error_responses(400, 404, 408, 413, 415, 429, 503),  # 408/429: api/limits.py
                },
            },
        },
        "/topics/{topic}/partitions/{partition}/records": {
            "parameters": [TOPIC, PARTITION],
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
                    {
                        "name": "columns",
                        "in": "query",
                        "description": (
                            "Fetch nodes, Arrow answers only: typed columns to add after the "
                            "record columns, comma-separated: value_typed, value_error "
                            "(docs/lake-tables.md). Cold records read them from their files, "
                            "hot ones are decoded by the node. 400 for another name, a JSON "
                            "answer, or a topic whose lake.mode is key_value; brokers answer 400."
                        ),
                        "schema": {"type": "string", "example": "value_typed,value_error"},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "Records",
                        "content": {
                            "application/json": {"schema": ref("FetchResponse")},
                            "application/vnd.apache.arrow.stream": {
                                "schema": {"type": "string", "format": "binary"}
                            },
                        },
                    },
                    **error_responses(400, 404, 416, 429, 503),  # 429: consumer quota
                },
            },
        },
        "/topics/{topic}/partitions/{partition}/offsets": {
            "parameters": [TOPIC, PARTITION],
            "get": {
                "summary": "Earliest, latest, or first offset at/after a timestamp (ms)",
                "parameters": [{"name": "at", "in": "query", "schema": {"type": "string"}}],
                "responses": {
                    "200": json_response({"type": "object"}),
                    **error_responses(400, 404),
                },
            },
        },
        "/producers": {
            "post": {
                "summary": "A new idempotent producer id (Kafka's InitProducerId)",
                "responses": {
                    "201": json_response({"type": "object", "required": ["producer_id"]})
                },
            },
        },
        "/healthz": {
            "get": {"summary": "Liveness", "responses": {"200": json_response({"type": "object"})}}
        },
        "/readyz": {
            "get": {
                "summary": "Readiness: started, metadata loaded, broker lease current",
                "responses": {
                    "200": json_response({"type": "object"}),
                    "503": json_response(
                        {"type": "object"}, "Starting, or the broker lease lapsed"
                    ),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics (with auth on: a key with DESCRIBE on the cluster)",
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
                "responses": {"200": json_response(ref("BrokerList"))},
            }
        },
        **ERASURE_PATHS,
        **SEARCH_PATHS,
        **GROUP_PATHS,
        **LAKE_PATHS,
        **SECURITY_PATHS,
    },
}

# API keys (cluster/http/auth.py): every path needs one unless auth is off, but the open ones.
OPENAPI["components"] = {
    "securitySchemes": {
        "apiKey": {
            "type": "http",
            "scheme": "bearer",
            "description": "tlk_<id>_<secret>, made by `tierlog users create`",
        }
    },
    "schemas": {**SCHEMAS, **GROUP_SCHEMAS},
}
OPENAPI["security"] = [{"apiKey": []}]
_OPEN_PATHS = ("/healthz", "/readyz", "/openapi.json")  # auth.OPEN_PATHS
_WRITES = ("post", "put", "patch", "delete")
# Operations whose only 429 is the failed-login throttle's: with auth off they never answer it.
_THROTTLE_ONLY: set[tuple[str, str]] = set()
for _path, _item in OPENAPI["paths"].items():
    for _method, _op in _item.items():
        if _method == "parameters":
            continue
        if _path in _OPEN_PATHS:
            _op["security"] = []
        else:
            # No key or a bad one (401); a key whose principal the ACLs refuse (403); a source
            # with too many failed logins whose turn is too far off (429: cluster/auth_throttle.py).
            if "429" not in _op["responses"]:
                _THROTTLE_ONLY.add((_path, _method))
            _op["responses"].update(error_responses(401, 403, 429))
        # Every write may be refused as cross-site (403), and any body of an undocumented
        # media type with 415 (cluster/http/cross_site.py).
        if _method in _WRITES:
            _op["responses"].update(error_responses(403, 415))


def for_auth(doc: dict[str, Any], auth_enabled: bool) -> dict[str, Any]:
    """`doc` as a node serves it: with auth off (--insecure) nothing needs a key, and a
    document that still said so would misdescribe the API (clients, fuzzers and docs pages
    would expect 401 where the node answers 200). The component schemas stay: the paths
    reference them."""
    if auth_enabled:
        return doc
    paths = {
        path: {
            k: op if k == "parameters" else _without_auth(k, op, (path, k) in _THROTTLE_ONLY)
            for k, op in item.items()
        }
        for path, item in doc["paths"].items()
    }
    open_doc = {k: v for k, v in doc.items() if k != "security"}
    components = {"schemas": doc["components"]["schemas"]}
    return {**open_doc, "paths": paths, "components": components}


def _without_auth(method: str, op: dict[str, Any], throttle_only: bool) -> dict[str, Any]:
    # Without ACLs only a cross-site write is refused (403); nothing answers 401, nor 429 for
    # failed logins.
    gone: tuple[str, ...] = ("401",) if method in _WRITES else ("401", "403")
    gone += ("429",) if throttle_only else ()
    responses = {code: r for code, r in op["responses"].items() if code not in gone}
    return {**{k: v for k, v in op.items() if k != "security"}, "responses": responses}
