"""Failed authentication attempts, throttled and audited: HTTP API keys and Kafka SASL alike.

Kafka answers a failed authentication only after `connection.failed.authentication.delay.ms`,
which slows a guesser that uses one connection at a time. Guessers open many, so here the
failures are counted per client address and per key id over a window, and once a source has
had `free` failures in it, its further attempts take turns: one per `delay` per source,
waited out *before* the key is looked up, so neither the rate of guesses nor the CPU they
cost grows with the connections a guesser opens. An attempt whose turn is further off than
`max_wait` is refused at once (HTTP 429 with Retry-After, Kafka SASL_AUTHENTICATION_FAILED),
so waiting attempts cannot pile up. A key that authenticated recently skips the queue: a
client whose key is right is not slowed by a guesser on its address or its key id. A guess
is a credential not tried before: the same wrong key sent again (a misconfigured client
retrying) is answered at once (the authorizer caches its verdict) and does not count again.

Every failure is one WARNING line on `tierlog.auth` (protocol, address, key id, mechanism,
why; never a traceback, never the secret) and counts in `tierlog_auth_failures_total`;
refused attempts count in `tierlog_auth_throttled_total`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from prometheus_client import Counter

from cluster import node_settings as node
from logformat.errors import ErrorCode, TierlogError

log = logging.getLogger("tierlog.auth")

AUTH_FAILURES = Counter(
    "tierlog_auth_failures_total", "Failed authentication attempts", ["protocol", "mechanism"]
)
AUTH_THROTTLED = Counter(
    "tierlog_auth_throttled_total",
    "Authentication attempts refused unheard: their source failed too often recently",
    ["protocol"],
)
_MAX_SOURCES = 100_000  # addresses and key ids tracked; a flood of new ones starts over
_GOOD_FOR_S = 3600.0  # a key that authenticated skips the queue this long


class ThrottleSettings(NamedTuple):
    free: int = (
        node.FAILED_AUTH_FREE.default
    )  # failures per source in the window before attempts take turns
    delay_ms: int = (
        node.FAILED_AUTH_DELAY_MS.default
    )  # one attempt per source per this, once it has failed `free` times
    window_ms: int = node.FAILED_AUTH_WINDOW_MS.default
    max_wait_ms: int = (
        node.FAILED_AUTH_MAX_WAIT_MS.default
    )  # a turn further off than this is refused at once


class AuthThrottled(TierlogError):
    """An attempt refused unheard; `headers` carries HTTP's Retry-After."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(ErrorCode.THROTTLING_QUOTA_EXCEEDED, message)
        self.retry_after_s = retry_after_s
        self.headers = {"Retry-After": str(retry_after_s)}


class Attempt(NamedTuple):
    """Who is trying: for the turn-taking and the audit line."""

    protocol: str  # "http" | "kafka"
    address: str
    key_id: str | None
    mechanism: str  # "bearer" | "PLAIN" | "SCRAM-SHA-256" | ...


class _Source:
    __slots__ = ("failures", "next_turn")

    def __init__(self) -> None:
        self.failures: deque[float] = deque()
        self.next_turn = 0.0


class AuthThrottle:
    def __init__(
        self, settings: ThrottleSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._sources: dict[str, _Source] = {}
        self._good: dict[bytes, float] = {}
        self._bad: dict[bytes, float] = {}  # wrong credentials seen within the window

    def _hot(self, name: str, now: float) -> _Source | None:
        """The source when it has failed `free` times within the window, else None."""
        src = self._sources.get(name)
        if src is None:
            return None
        horizon = now - self.settings.window_ms / 1000
        while src.failures and src.failures[0] < horizon:
            src.failures.popleft()
        if len(src.failures) >= self.settings.free:
            return src
        if not src.failures and src.next_turn <= now:
            del self._sources[name]
        return None

    def _names(self, attempt: Attempt) -> list[str]:
        names = [f"address:{attempt.address}"]
        if attempt.key_id:
            names.append(f"key:{attempt.key_id}")
        return names

    @staticmethod
    def _known(seen: dict[bytes, float], secret: bytes | None, now: float) -> bool:
        if secret is None:
            return False
        until = seen.get(hashlib.sha256(secret).digest())
        return until is not None and until > now

    @staticmethod
    def _remember(seen: dict[bytes, float], secret: bytes, until: float) -> None:
        if len(seen) >= _MAX_SOURCES:
            seen.clear()
        seen[hashlib.sha256(secret).digest()] = until

    async def turn(self, attempt: Attempt, secret: bytes | None = None) -> None:
        """Wait this attempt's turn (at once unless its source failed often of late);
        raises THROTTLING_QUOTA_EXCEEDED, with Retry-After, when it is too far off."""
        now = self._clock()
        if self._known(self._good, secret, now) or self._known(self._bad, secret, now):
            return
        hot = [s for n in self._names(attempt) if (s := self._hot(n, now)) is not None]
        if not hot:
            return
        at = max(now, *(s.next_turn for s in hot))
        wait = at - now
        if wait > self.settings.max_wait_ms / 1000:
            AUTH_THROTTLED.labels(attempt.protocol).inc()
            retry = max(1, math.ceil(wait))
            raise AuthThrottled(
                f"too many failed authentication attempts from {attempt.address}"
                + (f" or for key {attempt.key_id}" if attempt.key_id else "")
                + f"; retry in {retry} s",
                retry,
            )
        for s in hot:
            s.next_turn = at + self.settings.delay_ms / 1000
        if wait > 0:
            await asyncio.sleep(wait)

    def failed(self, attempt: Attempt, why: str, secret: bytes | None = None) -> None:
        """Audit a failure; count it against its address and key id unless the same wrong
        credential failed already within the window."""
        now = self._clock()
        if len(self._sources) >= _MAX_SOURCES:
            self._sources.clear()
        repeated = self._known(self._bad, secret, now)
        if secret is not None and not repeated:
            self._remember(self._bad, secret, now + self.settings.window_ms / 1000)
        counts = [0]
        for name in [] if repeated else self._names(attempt):
            src = self._sources.setdefault(name, _Source())
            src.failures.append(now)
            if len(src.failures) > 4 * max(1, self.settings.free):  # enough to decide
                src.failures.popleft()
            counts.append(len(src.failures))
        AUTH_FAILURES.labels(attempt.protocol, attempt.mechanism).inc()
        log.warning(
            "authentication failed: %s",
            why,
            extra={
                "protocol": attempt.protocol,
                "peer": attempt.address,
                "key_id": attempt.key_id,
                "mechanism": attempt.mechanism,
                "recent_failures": max(counts),
            },
        )

    def succeeded(self, secret: bytes | None) -> None:
        if secret is not None:
            self._remember(self._good, secret, self._clock() + _GOOD_FOR_S)
