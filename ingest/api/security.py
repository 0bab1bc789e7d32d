"""Security administration over HTTP: API keys, ACLs, "what may this principal do", quotas.

What `tierlog users|acls|quotas` do against Postgres, for callers that hold only an API key
(the web console). Authorization is Kafka's for the same admin requests: DESCRIBE on the
cluster to list (DescribeAcls, DescribeClientQuotas), ALTER on the cluster to change
(CreateAcls, DeleteAcls, AlterClientQuotas); API keys are user credentials, so the same.
Nodes pick every change up at once through NOTIFY (metadata/security.py's triggers).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse, json_object, only_fields
from logformat.errors import ErrorCode, TierlogError
from metadata.acl import OPERATIONS, AclBinding, allowed, validate
from metadata.quotas import QUOTA_KEYS, QuotaEntry, check_entity
from metadata.scram import MECHANISMS as SCRAM_MECHANISMS
from metadata.security import SecurityRepo, user_principal

if TYPE_CHECKING:
    from ingest.service.security import Security
    from ingest.service.services import Services

BODY_LIMIT = 64 * 1024
MAX_TEXT = 512  # names and descriptions: longer is a mistake, not a name
_CHECKED_OPS = tuple(op for op in OPERATIONS if op != "all")
_ACL_FIELDS = frozenset(AclBinding._fields)


def _security(request: Request) -> Security:
    services: Services = request.app.state.services
    return services.security


def _repo(request: Request) -> SecurityRepo:
    return _security(request).keys


def _invalid(message: str) -> TierlogError:
    return TierlogError(ErrorCode.INVALID_REQUEST, message)


def _text(doc: dict[str, Any], name: str, default: str | None = None) -> str:
    value = doc.get(name, default)
    if not isinstance(value, str) or not value:
        raise _invalid(f"{name!r} must be a non-empty string")
    return _printable(name, value)


def _printable(name: str, value: str) -> str:
    """Text stored in Postgres: no control characters (NUL cannot be stored at all)."""
    if len(value) > MAX_TEXT or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise _invalid(f"{name!r} must be at most {MAX_TEXT} printable characters")
    return value


def _only_params(request: Request, *allowed: str) -> None:
    unknown = sorted(set(request.query_params) - set(allowed))
    if unknown:
        raise _invalid(f"unknown query parameter(s): {', '.join(unknown)}")


# -- API keys -------------------------------------------------------------------------------


async def list_keys(request: Request) -> JSONResponse:
    auth.require_cluster(request, "describe")
    _only_params(request)
    keys = await asyncio.to_thread(_repo(request).list_keys)
    return JSONResponse(
        {
            "keys": [
                {
                    "key_id": k.key_id,
                    "principal": k.principal,
                    "description": k.description,
                    "created_at": k.created_at.isoformat(),
                    "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None,
                }
                for k in keys
            ]
        }
    )


async def create_key(request: Request) -> JSONResponse:
    """201 with the key itself: the only time its secret is ever shown (only a salted hash
    is stored)."""
    auth.require_cluster(request, "alter")
    _only_params(request)
    doc = await json_object(request, BODY_LIMIT)
    only_fields(doc, ("user", "description"))
    user = _text(doc, "user")
    description = doc.get("description")
    if description is not None and not isinstance(description, str):
        raise _invalid("'description' must be a string")
    if description:
        _printable("description", description)
    try:
        principal, key = await asyncio.to_thread(
            _repo(request).create_key, user, description or None
        )
    except ValueError as exc:
        raise _invalid(str(exc)) from None
    key_id = key.split("_")[1]
    return JSONResponse({"key_id": key_id, "principal": principal, "key": key}, status_code=201)


async def revoke_key(request: Request) -> JSONResponse:
    auth.require_cluster(request, "alter")
    _only_params(request)
    key_id = _printable("key_id", request.path_params["key_id"])
    repo = _repo(request)
    keys = {k.key_id: k for k in await asyncio.to_thread(repo.list_keys)}
    found = keys.get(key_id)
    if found is None:
        raise TierlogError(ErrorCode.NOT_FOUND, f"no API key {key_id!r}")
    revoked = await asyncio.to_thread(repo.revoke, found.principal, key_id)
    return JSONResponse({"key_id": key_id, "principal": found.principal, "revoked": bool(revoked)})


async def set_scram(request: Request) -> JSONResponse:
    """Store SCRAM credentials of a key for the Kafka listener (metadata/scram.py). The body
    carries the key itself: holding it is the authority (it can log in as itself anyway),
    and only its salted SCRAM credential is stored."""
    _only_params(request)
    key_id = _printable("key_id", request.path_params["key_id"])
    doc = await json_object(request, BODY_LIMIT)
    unknown = sorted(set(doc) - {"key", "mechanisms"})
    if unknown:
        raise _invalid(f"unknown field(s): {', '.join(unknown)}")
    key = _text(doc, "key")
    mechanisms = doc.get("mechanisms", list(SCRAM_MECHANISMS))
    if not isinstance(mechanisms, list) or not all(isinstance(m, str) for m in mechanisms):
        raise _invalid("'mechanisms' must be a list of SCRAM-SHA-256 and/or SCRAM-SHA-512")
    if key.split("_")[1:2] != [key_id]:
        raise _invalid("'key' is not the API key with this key id")
    try:
        _, principal = await asyncio.to_thread(
            _security(request).scram.set_for_key, key, tuple(mechanisms)
        )
    except ValueError as exc:
        raise _invalid(str(exc)) from None
    return JSONResponse({"key_id": key_id, "principal": principal, "mechanisms": mechanisms})


# -- ACLs -----------------------------------------------------------------------------------


def _binding(doc: dict[str, Any]) -> AclBinding:
    """A binding from a JSON body or query parameters, validated (400 naming the field)."""
    try:
        return validate(
            AclBinding(
                principal=_text(doc, "principal"),
                resource_type=_text(doc, "resource_type"),
                pattern_type=_text(doc, "pattern_type", "literal"),
                resource_name=_text(doc, "resource_name"),
                operation=_text(doc, "operation"),
                permission=_text(doc, "permission", "allow"),
            )
        )
    except ValueError as exc:
        raise _invalid(str(exc)) from None


async def list_acls(request: Request) -> JSONResponse:
    auth.require_cluster(request, "describe")
    _only_params(request, "principal")
    wanted = request.query_params.get("principal")
    rows = await asyncio.to_thread(_repo(request).acls)
    return JSONResponse(
        {"acls": [b._asdict() for b in rows if wanted is None or b.principal == wanted]}
    )


async def add_acl(request: Request) -> JSONResponse:
    auth.require_cluster(request, "alter")
    _only_params(request)
    doc = await json_object(request, BODY_LIMIT)
    only_fields(doc, _ACL_FIELDS)
    binding = _binding(doc)
    created = await asyncio.to_thread(_repo(request).add_acl, binding)
    return JSONResponse(
        {"acl": binding._asdict(), "created": created}, status_code=201 if created else 200
    )


async def remove_acl(request: Request) -> JSONResponse:
    """DELETE /acls?principal=…&resource_type=…&resource_name=…&operation=…(&pattern_type,
    &permission): exactly one binding; 404 when there is none such."""
    auth.require_cluster(request, "alter")
    _only_params(request, *_ACL_FIELDS)
    binding = _binding(dict(request.query_params))
    if not await asyncio.to_thread(_repo(request).remove_acl, binding):
        raise TierlogError(ErrorCode.NOT_FOUND, f"no such ACL: {_describe(binding)}")
    return JSONResponse({"acl": binding._asdict(), "deleted": True})


def _describe(b: AclBinding) -> str:
    return (
        f"{b.permission} {b.principal} {b.operation} on {b.resource_type} "
        f"{b.pattern_type} {b.resource_name!r}"
    )


async def principal_rights(request: Request) -> JSONResponse:
    """What a principal may do: for every resource its ACLs (or User:*'s) name, the
    operations allowed by Kafka's rules (deny wins, describe implied); super users and an
    auth-off cluster may do everything."""
    auth.require_cluster(request, "describe")
    _only_params(request, "principal")
    raw = _text(dict(request.query_params), "principal")
    try:
        principal = user_principal(raw)
    except ValueError as exc:
        raise _invalid(str(exc)) from None
    authorizer = request.scope[auth.AUTHORIZER]
    everything = authorizer.is_super(principal)
    rows = await asyncio.to_thread(_repo(request).acls)
    mine = [b for b in rows if b.principal in (principal, "User:*")]
    resources = sorted({(b.resource_type, b.pattern_type, b.resource_name) for b in mine})
    return JSONResponse(
        {
            "principal": principal,
            "super_user": everything,
            "resources": [
                {
                    "resource_type": rtype,
                    "pattern_type": pattern,
                    "resource_name": name,
                    "allowed": [
                        op
                        for op in _CHECKED_OPS
                        if everything or allowed(mine, principal, rtype, name, op)
                    ],
                }
                for rtype, pattern, name in resources
            ],
        }
    )


# -- quotas ---------------------------------------------------------------------------------


def _quota(e: QuotaEntry) -> dict[str, Any]:
    return e._asdict()


async def list_quotas(request: Request) -> JSONResponse:
    auth.require_cluster(request, "describe")
    _only_params(request)
    entries = await asyncio.to_thread(_security(request).quotas.entries)
    return JSONResponse({"quotas": [_quota(e) for e in entries]})


async def set_quota(request: Request) -> JSONResponse:
    """PUT /quotas/{entity} {"producer_byte_rate": n|null, "consumer_byte_rate": n|null}:
    a number sets the rate, null removes it, a key left out is kept."""
    auth.require_cluster(request, "alter")
    _only_params(request)
    entity = check_entity(_printable("entity", request.path_params["entity"]))
    doc = await json_object(request, BODY_LIMIT)
    unknown = set(doc) - set(QUOTA_KEYS)
    if unknown or not doc:
        raise TierlogError(ErrorCode.INVALID_CONFIG, f"quota keys are {', '.join(QUOTA_KEYS)}")
    rates = {k: v for k, v in doc.items() if v is not None}
    for key, value in rates.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise TierlogError(ErrorCode.INVALID_CONFIG, f"{key} must be an integer (bytes/s)")
    cleared = tuple(k for k, v in doc.items() if v is None)
    repo = _security(request).quotas
    if rates:
        await asyncio.to_thread(repo.set, entity, rates)
    if cleared:
        await asyncio.to_thread(repo.remove, entity, cleared)
    entries = {e.entity: e for e in await asyncio.to_thread(repo.entries)}
    entry = entries.get(entity, QuotaEntry(entity, None, None))
    return JSONResponse(_quota(entry))


async def remove_quota(request: Request) -> JSONResponse:
    auth.require_cluster(request, "alter")
    _only_params(request)
    entity = check_entity(_printable("entity", request.path_params["entity"]))
    if not await asyncio.to_thread(_security(request).quotas.remove, entity):
        raise TierlogError(ErrorCode.NOT_FOUND, f"no quota is set for {entity!r}")
    return JSONResponse({"entity": entity, "deleted": True})


routes = [
    Route("/security/keys", list_keys, methods=["GET"]),
    Route("/security/keys", create_key, methods=["POST"]),
    Route("/security/keys/{key_id}", revoke_key, methods=["DELETE"]),
    Route("/security/keys/{key_id}/scram", set_scram, methods=["PUT"]),
    Route("/acls", list_acls, methods=["GET"]),
    Route("/acls", add_acl, methods=["POST"]),
    Route("/acls", remove_acl, methods=["DELETE"]),
    Route("/acls/principal", principal_rights, methods=["GET"]),
    Route("/quotas", list_quotas, methods=["GET"]),
    Route("/quotas/{entity}", set_quota, methods=["PUT"]),
    Route("/quotas/{entity}", remove_quota, methods=["DELETE"]),
]
