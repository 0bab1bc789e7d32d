"""Authentication middleware and the authorization checks the routes make.

The middleware names the caller in the ASGI scope before any route (or the quota
middleware, which reads it) runs:
- ``scope["tierlog.principal"]``: ``"User:<name>"`` for a valid API key
  (``Authorization: Bearer tlk_…``), ``"cluster"`` for the cluster credential
  (``x-tierlog-cluster-token``: forwarded and proxied calls, fetch nodes), and
  ``"User:ANONYMOUS"`` when auth is off or on the open paths (and /docs, the API docs page);
- ``scope["tierlog.authorizer"]``: the node's Authorizer, for the routes' checks.

Confluent's registry clients send a key as HTTP Basic (``basic.auth.user.info``): the user
is the key's id (``<id>`` or ``tlk_<id>``) and the password the whole key (or its secret).

Missing, unknown or revoked keys get 401 SASL_AUTHENTICATION_FAILED with
``WWW-Authenticate: Bearer``. /internal/... is left to its own cluster-credential check
(a public key there gets 403 CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import base64

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from cluster.auth_throttle import Attempt
from cluster.authorizer import ANONYMOUS, CLUSTER, Authorizer
from cluster.authorizer import denied as authorizer_denied
from cluster.http.api_docs import is_docs_path
from cluster.http.responses import error_response
from cluster.internal_http import CLUSTER_TOKEN_HEADER
from logformat.errors import ErrorCode, TierlogError
from metadata.acl import CLUSTER_NAME
from metadata.api_keys import PREFIX, parse_key

PRINCIPAL = "tierlog.principal"
AUTHORIZER = "tierlog.authorizer"
# /metrics is not open: it names every topic, principal and group (issue 24 K7); with auth
# on, a scraper sends a key whose principal may DESCRIBE the cluster (require_metrics_reader).
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json"})
_TOKEN = CLUSTER_TOKEN_HEADER.encode()


class AuthMiddleware:
    """Pure ASGI (no BaseHTTPMiddleware): on the produce path it costs a header scan and a
    dict lookup."""

    def __init__(self, app: ASGIApp, authorizer: Authorizer) -> None:
        self.app = app
        self.authorizer = authorizer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        auth = self.authorizer
        scope[AUTHORIZER] = auth
        token = bearer = None
        for name, value in scope["headers"]:
            if name == _TOKEN:
                token = value.decode("latin-1")
            elif name == b"authorization":
                bearer = value.decode("latin-1")
        path: str = scope["path"]
        if token is not None and auth.is_cluster(token):
            principal: str | None = CLUSTER
        elif not auth.enabled or _keyless(path):
            principal = ANONYMOUS
        else:
            try:
                principal = await self._authenticate(bearer, _address(scope))
            except TierlogError as exc:
                await error_response(exc)(scope, receive, send)
                return
            if principal is None:
                why = "missing" if bearer is None else "invalid, unknown or revoked"
                error = TierlogError(
                    ErrorCode.SASL_AUTHENTICATION_FAILED,
                    f"authentication failed: API key {why} (send Authorization: Bearer <key>, "
                    "or Basic with the key's id as user and the key as password)",
                )
                response = error_response(error, headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        scope[PRINCIPAL] = principal
        await self.app(scope, receive, send)

    async def _authenticate(self, header: str | None, address: str) -> str | None:
        """The key's principal; a present but wrong key is a failed attempt (throttled after
        a few, each one logged: cluster/auth_throttle.py), a missing one is not."""
        if header is None:
            return None
        scheme, _, key = header.strip().partition(" ")
        mechanism = scheme.lower()
        key = key.strip()
        if mechanism == "basic":  # Confluent clients' basic.auth.user.info: id:key
            key = basic_key(key) or ""
        elif mechanism != "bearer":
            key = ""
        parsed = parse_key(key)
        attempt = Attempt("http", address, parsed.key_id if parsed else None, mechanism)
        if not key:
            raw = header.encode()
            await self.authorizer.throttle.turn(attempt, raw)
            self.authorizer.throttle.failed(attempt, "not a Bearer or Basic API key", raw)
            return None
        return await self.authorizer.login(key, attempt)  # also refreshes the ACLs


def _address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def basic_key(credentials: str) -> str | None:
    """The API key in HTTP Basic credentials `base64(id:key)`, or None when they do not
    name one key (the user must be the key's id)."""
    try:
        user, sep, password = base64.b64decode(credentials, validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    key_id = user.removeprefix(f"{PREFIX}_")
    if not sep or not key_id:
        return None
    key = password if password.startswith(f"{PREFIX}_") else f"{PREFIX}_{key_id}_{password}"
    parsed = parse_key(key)
    return key if parsed is not None and parsed.key_id == key_id else None


def _keyless(path: str) -> bool:
    """Paths answered without an API key: the open ones, the docs page and its assets (like
    /openapi.json), and /internal/... (its routes check the cluster credential)."""
    return path in OPEN_PATHS or is_docs_path(path) or path.startswith("/internal/")


def principal(request: Request) -> str:
    return str(request.scope.get(PRINCIPAL, ANONYMOUS))


def _authorizer(request: Request) -> Authorizer:
    auth = request.scope.get(AUTHORIZER)
    if not isinstance(auth, Authorizer):  # fail closed: an app built without the middleware
        raise TierlogError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "no authorizer on this node")
    return auth


def permitted(request: Request, resource_type: str, name: str, operation: str) -> bool:
    return _authorizer(request).allowed(principal(request), resource_type, name, operation)


def require(request: Request, resource_type: str, name: str, operation: str) -> None:
    """Raise 403 (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED) unless allowed. Call it before
    looking the resource up, so a denied caller learns nothing about whether it exists."""
    _authorizer(request).require(principal(request), resource_type, name, operation)


def denied(request: Request, resource_type: str, name: str, operation: str) -> TierlogError:
    return authorizer_denied(principal(request), resource_type, name, operation)


def require_cluster(request: Request, operation: str) -> None:
    require(request, "cluster", CLUSTER_NAME, operation)


def require_metrics_reader(request: Request) -> None:
    """/metrics names every topic, group and principal: DESCRIBE on the cluster (what Kafka
    asks for DescribeCluster and DescribeConfigs of the cluster) to read it."""
    require_cluster(request, "describe")
