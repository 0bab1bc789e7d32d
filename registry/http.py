"""What every registry route shares: Confluent-shaped errors (never a 500 page), the blocking
store calls on the registry's own threads, bodies read within bounds, and access checks on
the `subject` ACL resource (read for GETs, write to register, alter for config, mode and
deletes)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response

from cluster.authorizer import Authorizer
from cluster.http.auth import AUTHORIZER, principal
from logformat.errors import TierlogError
from metadata.acl import CLUSTER_NAME
from registry.bodies import MAX_BODY_BYTES, too_large
from registry.errors import FORBIDDEN, STORE_ERROR, RegistryError
from registry.service import Registry

log = logging.getLogger("tierlog.registry")

T = TypeVar("T")
Handler = Callable[[Request], Awaitable[Response]]


class Context:
    """The registry and the threads its blocking calls run on."""

    def __init__(self, registry: Registry, executor: ThreadPoolExecutor) -> None:
        self.registry = registry
        self.executor = executor

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args))


def endpoint(handler: Handler) -> Handler:
    """Answer every failure as Confluent does: its error body, never a stack trace."""

    @functools.wraps(handler)
    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except RegistryError as exc:
            return exc.response()
        except TierlogError as exc:
            status = exc.http_status
            return RegistryError(status, status * 100 + 1, exc.message).response()
        except Exception:
            log.exception("schema registry request failed", extra={"path": request.url.path})
            return RegistryError(500, STORE_ERROR, "Error in the backend datastore").response()

    return wrapped


async def body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large(int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large(size)
        chunks.append(chunk)
    return b"".join(chunks)


def _authorizer(request: Request) -> Authorizer | None:
    auth = request.scope.get(AUTHORIZER)
    return auth if isinstance(auth, Authorizer) else None


def may(request: Request, subject: str, operation: str) -> bool:
    auth = _authorizer(request)
    if auth is None:  # fail closed: an app built without the auth middleware
        return False
    return auth.allowed(principal(request), "subject", subject, operation)


def require(request: Request, subject: str, operation: str) -> None:
    if not may(request, subject, operation):
        raise RegistryError(
            403,
            FORBIDDEN,
            f"{principal(request)} is not authorized to {operation} subject '{subject}'",
        )


def require_cluster(request: Request, operation: str) -> None:
    """Global config and mode: `operation` on the cluster resource."""
    auth = _authorizer(request)
    if auth is None or not auth.allowed(principal(request), "cluster", CLUSTER_NAME, operation):
        raise RegistryError(
            403,
            FORBIDDEN,
            f"{principal(request)} is not authorized to {operation} the registry's global settings",
        )


def auth_enabled(request: Request) -> bool:
    auth = _authorizer(request)
    return auth is None or auth.enabled
