"""Who is calling, and may they: verified API keys and ACLs, cached in memory.

- Keys: a verified key (or a rejected one) is remembered for `cache_ttl_s`, so the produce
  path costs one dict lookup, not a Postgres query and an scrypt hash. Concurrent first uses
  of one key share one verification. Revocation therefore takes effect within the TTL at
  worst; the NOTIFY from migration 0006's triggers normally clears the cache at once.
- ACLs: the whole table is held in memory (it is small) and reloaded when NOTIFY says it
  changed, or every `cache_ttl_s` in case a notification was lost. Decisions are memoized
  per (principal, resource, operation) until the next reload.
- Super users (Kafka's `super.users`) and the cluster principal may do anything. With auth
  off (`--insecure`) every request is `User:ANONYMOUS` and everything is allowed, as a Kafka
  broker without an authorizer.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from sqlalchemy.engine import Engine

from cluster.auth_throttle import Attempt, AuthThrottle, ThrottleSettings
from cluster.notify_hub import NotifyHub
from logformat.errors import ErrorCode, TierlogError
from metadata.acl import CLUSTER_NAME, AclBinding, allowed, allowed_on_any
from metadata.api_keys import parse_key, verify_secret
from metadata.security import SECURITY_CHANNEL, SecurityRepo

log = logging.getLogger("tierlog.auth")

# A refusal's error code per resource type: one map for both protocols (HTTP answers 403,
# Kafka the code of the same name).
DENIED = {
    "topic": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    "group": ErrorCode.GROUP_AUTHORIZATION_FAILED,
    "cluster": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
}


def denied(principal: str, resource_type: str, name: str, operation: str) -> TierlogError:
    what = "the cluster" if resource_type == "cluster" else f"{resource_type} {name!r}"
    return TierlogError(
        DENIED[resource_type], f"{principal} is not authorized to {operation} {what}"
    )


ANONYMOUS = "User:ANONYMOUS"
CLUSTER = "cluster"  # requests carrying the cluster credential (forwarding, fetch nodes)
_HASHING_THREADS = 2  # key verifications at once: bounds their CPU as well
_MAX_CACHED = 100_000  # entries; a flood of distinct bad keys clears the cache, not the heap


class AuthSettings(NamedTuple):
    enabled: bool = True
    super_users: frozenset[str] = frozenset()
    cache_ttl_s: float = 5.0
    throttle: ThrottleSettings = ThrottleSettings()  # failed attempts (auth_throttle.py)


class Authorizer:
    def __init__(
        self,
        engine: Engine,
        notices: NotifyHub,
        settings: AuthSettings,
        cluster_secret: Callable[[], str],
    ) -> None:
        """`notices`: the node's LISTEN connection (security changes are NOTIFYed)."""
        self.settings = settings
        self.enabled = settings.enabled
        self._repo = SecurityRepo(engine)
        self._cluster_secret = cluster_secret
        self._keys: dict[str, tuple[float, str | None]] = {}  # key → (until, principal|None)
        self._verifying: dict[str, asyncio.Future[str | None]] = {}
        self._acls: list[AclBinding] = []
        self._by_principal: dict[str, list[AclBinding]] = {}
        self._decisions: dict[tuple[str, str, str, str], bool] = {}
        self._acls_at = float("-inf")
        self._dirty = True
        self._reload_lock = asyncio.Lock()
        self._listener = notices.subscribe(SECURITY_CHANNEL, self._changed)
        self.throttle = AuthThrottle(settings.throttle)
        # Key hashes (scrypt: ~0.1 s of CPU and 16 MiB each) run in threads of their own: in
        # the default executor a burst of logins would queue the broker's lease heartbeat
        # behind them until the lease lapsed (issue 24 K10).
        self._hashing = ThreadPoolExecutor(_HASHING_THREADS, thread_name_prefix="key-verify")

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if not self.enabled:
            log.warning(
                "AUTHENTICATION IS OFF (--insecure): every client may do anything; "
                "never expose this listener beyond a trusted network"
            )
            return
        self._listener.start()
        await self.refresh()
        log.info(
            "authentication on (API keys), ACLs loaded",
            extra={"acls": len(self._acls), "super_users": sorted(self.settings.super_users)},
        )

    def stop(self) -> None:
        self._listener.stop()
        self._hashing.shutdown(wait=False, cancel_futures=True)

    def _changed(self) -> None:  # listener thread: flags only, the event loop does the work
        self._dirty = True

    # -- authentication ---------------------------------------------------------------------

    def is_cluster(self, token: str) -> bool:
        secret = self._cluster_secret()
        return bool(secret) and hmac.compare_digest(token.encode(), secret.encode())

    async def authenticate(self, key: str) -> str | None:
        """The key's principal, or None for a missing, unknown, wrong or revoked key."""
        if parse_key(key) is None:
            return None  # not shaped like a key: no lookup, nothing to cache
        await self.refresh()
        now = time.monotonic()
        hit = self._keys.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        pending = self._verifying.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._verifying[key] = future
        try:
            loop = asyncio.get_running_loop()
            principal = await loop.run_in_executor(self._hashing, self._verify, key)
            if len(self._keys) >= _MAX_CACHED:
                self._keys.clear()
            self._keys[key] = (time.monotonic() + self.settings.cache_ttl_s, principal)
            future.set_result(principal)
            return principal
        except Exception as exc:
            log.warning("verifying an API key failed", extra={"error": str(exc)})
            err = TierlogError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, "cannot verify the API key right now"
            )
            future.set_exception(err)
            future.exception()  # retrieved: waiters get it through shield, no loop warning
            raise err from exc
        finally:
            del self._verifying[key]

    async def login(self, key: str, attempt: Attempt) -> str | None:
        """authenticate() for a client's attempt: it waits its turn when its address or key
        id failed often of late, and a failure is audited (auth_throttle.py)."""
        secret = key.encode()
        await self.throttle.turn(attempt, secret)
        principal = await self.authenticate(key)
        if principal is None:
            self.throttle.failed(attempt, "unknown, revoked or wrong API key", secret)
        else:
            self.throttle.succeeded(secret)
        return principal

    def _verify(self, key: str) -> str | None:
        parsed = parse_key(key)
        assert parsed is not None
        stored = self._repo.find_key(parsed)
        if stored is None or stored.revoked:
            return None
        return stored.principal if verify_secret(parsed.secret, stored.salt, stored.hash) else None

    # -- authorization ----------------------------------------------------------------------

    async def refresh(self) -> None:
        """Reload keys' and ACLs' caches when NOTIFY said they changed or the TTL passed."""
        if not self.enabled:
            return
        if not self._dirty and time.monotonic() - self._acls_at < self.settings.cache_ttl_s:
            return
        async with self._reload_lock:
            if not self._dirty and time.monotonic() - self._acls_at < self.settings.cache_ttl_s:
                return
            was_dirty, self._dirty = self._dirty, False
            try:
                acls = await asyncio.to_thread(self._repo.acls)
            except Exception:
                self._dirty = was_dirty
                self._acls_at = time.monotonic()  # retry after a TTL, keep the old snapshot
                log.exception("reloading ACLs failed; keeping the previous ones")
                return
            self._set_acls(acls)
            if was_dirty:
                self._keys.clear()  # a key may have been revoked

    def _set_acls(self, acls: list[AclBinding]) -> None:
        self._acls = acls
        by: dict[str, list[AclBinding]] = {}
        for b in acls:
            by.setdefault(b.principal, []).append(b)
        self._by_principal = by
        self._decisions = {}
        self._acls_at = time.monotonic()

    def is_super(self, principal: str) -> bool:
        return not self.enabled or principal == CLUSTER or principal in self.settings.super_users

    def _relevant(self, principal: str) -> list[AclBinding]:
        return self._by_principal.get(principal, []) + self._by_principal.get("User:*", [])

    def allowed(self, principal: str, resource_type: str, name: str, operation: str) -> bool:
        if self.is_super(principal):
            return True
        k = (principal, resource_type, name, operation)
        hit = self._decisions.get(k)
        if hit is None:
            hit = allowed(self._relevant(principal), principal, resource_type, name, operation)
            if len(self._decisions) >= _MAX_CACHED:
                self._decisions.clear()
            self._decisions[k] = hit
        return hit

    def allowed_on_any(self, principal: str, resource_type: str, operation: str) -> bool:
        if self.is_super(principal):
            return True
        return allowed_on_any(self._relevant(principal), principal, resource_type, operation)

    def require(self, principal: str, resource_type: str, name: str, operation: str) -> None:
        """Raise TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED unless allowed. Call it before
        looking the resource up, so a denied caller learns nothing about whether it exists."""
        if not self.allowed(principal, resource_type, name, operation):
            raise denied(principal, resource_type, name, operation)

    def require_cluster_or_any_topic(self, principal: str, operation: str) -> None:
        """`operation` on the cluster, or on some topic (Kafka's rule for InitProducerId of
        an idempotent producer: IDEMPOTENT_WRITE on the cluster or WRITE on any topic,
        KIP-679)."""
        if self.allowed(principal, "cluster", CLUSTER_NAME, operation):
            return
        if not self.allowed_on_any(principal, "topic", operation):
            raise denied(principal, "cluster", CLUSTER_NAME, operation)
