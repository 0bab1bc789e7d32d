"""The security administration paths of the OpenAPI document (ingest/api/security.py):
API keys, ACLs, a principal's rights, client quotas. Listing needs DESCRIBE on the cluster,
changing needs ALTER on it (Kafka's rules for DescribeAcls / CreateAcls / AlterClientQuotas)."""

from __future__ import annotations

from typing import Any

from cluster.openapi.schemas import error_responses, json_body, json_response

_STR = {"type": "string"}
_OBJ = {"type": "object"}
_ACL_REQUIRED = ["principal", "resource_type", "resource_name", "operation"]
_ACL_FIELDS: dict[str, Any] = {
    "principal": {"type": "string", "description": "User:NAME or User:*"},
    "resource_type": {"type": "string", "enum": ["topic", "group", "cluster"]},
    "pattern_type": {"type": "string", "enum": ["literal", "prefixed"], "default": "literal"},
    "resource_name": {"type": "string", "description": "a name, a prefix, or *"},
    "operation": {
        "type": "string",
        "enum": ["read", "write", "create", "delete", "alter", "describe", "all"],
    },
    "permission": {"type": "string", "enum": ["allow", "deny"], "default": "allow"},
}
_ACL = {"type": "object", "required": _ACL_REQUIRED, "properties": _ACL_FIELDS}
_ACL_QUERY = [
    {"name": name, "in": "query", "required": name in _ACL_REQUIRED, "schema": schema}
    for name, schema in _ACL_FIELDS.items()
]
_RATE = {"type": ["integer", "null"], "minimum": 1, "description": "bytes/s; null: unset"}
_QUOTA = {
    "type": "object",
    "properties": {"producer_byte_rate": _RATE, "consumer_byte_rate": _RATE},
}
_ENTITY = {
    "name": "entity",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "User:NAME, or <default> for every principal without a row of its own",
}

SECURITY_PATHS: dict[str, Any] = {
    "/security/keys": {
        "get": {
            "summary": "API keys (ids, principals, dates; never secrets)",
            "responses": {"200": json_response(_OBJ), **error_responses(400)},
        },
        "post": {
            "summary": "Create an API key for a user (created if new); the answer is the only "
            "place the secret ever appears",
            "requestBody": json_body(
                {
                    "type": "object",
                    "required": ["user"],
                    "properties": {"user": _STR, "description": _STR},
                }
            ),
            "responses": {"201": json_response(_OBJ), **error_responses(400, 413)},
        },
    },
    "/security/keys/{key_id}": {
        "parameters": [{"name": "key_id", "in": "path", "required": True, "schema": _STR}],
        "delete": {
            "summary": "Revoke an API key (at once on every node)",
            "responses": {"200": json_response(_OBJ), **error_responses(400, 404)},
        },
    },
    "/security/keys/{key_id}/scram": {
        "parameters": [{"name": "key_id", "in": "path", "required": True, "schema": _STR}],
        "put": {
            "summary": "Store the key's SCRAM credentials for the Kafka listener "
            "(SASL/SCRAM: username the key id, password the key); the body carries the key",
            "requestBody": json_body(
                {
                    "type": "object",
                    "required": ["key"],
                    "additionalProperties": False,
                    "properties": {
                        "key": _STR,
                        "mechanisms": {
                            "type": "array",
                            "items": {"enum": ["SCRAM-SHA-256", "SCRAM-SHA-512"]},
                        },
                    },
                }
            ),
            "responses": {"200": json_response(_OBJ), **error_responses(400, 413)},
        },
    },
    "/acls": {
        "get": {
            "summary": "ACL bindings (of one principal with ?principal=)",
            "parameters": [{"name": "principal", "in": "query", "required": False, "schema": _STR}],
            "responses": {"200": json_response(_OBJ), **error_responses(400)},
        },
        "post": {
            "summary": "Add an ACL binding (201; 200 when it already existed)",
            "requestBody": json_body(_ACL),
            "responses": {
                "200": json_response(_OBJ),
                "201": json_response(_OBJ),
                **error_responses(400, 413),
            },
        },
        "delete": {
            "summary": "Remove one ACL binding, named by query parameters",
            "parameters": _ACL_QUERY,
            "responses": {"200": json_response(_OBJ), **error_responses(400, 404)},
        },
    },
    "/acls/principal": {
        "get": {
            "summary": "What a principal may do: the operations allowed on each resource its "
            "ACLs name (deny wins; describe implied by read/write/delete/alter)",
            "parameters": [{"name": "principal", "in": "query", "required": True, "schema": _STR}],
            "responses": {"200": json_response(_OBJ), **error_responses(400)},
        },
    },
    "/quotas": {
        "get": {
            "summary": "Client quotas (byte rates per principal, and <default>)",
            "responses": {"200": json_response(_OBJ), **error_responses(400)},
        },
    },
    "/quotas/{entity}": {
        "parameters": [_ENTITY],
        "put": {
            "summary": "Set an entity's rates (null removes one; a key left out is kept)",
            "requestBody": json_body(_QUOTA),
            "responses": {"200": json_response(_QUOTA), **error_responses(400, 413)},
        },
        "delete": {
            "summary": "Remove every rate of an entity",
            "responses": {"200": json_response(_OBJ), **error_responses(400, 404)},
        },
    },
}
