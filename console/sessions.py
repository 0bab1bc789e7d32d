"""Server-side console sessions: the browser's cookie carries an opaque random id; the API
key it stands for stays in this process's memory, with an expiry.

A stolen cookie therefore never reveals the key, and signing out ends the session here (the
old cookie no longer works even if a copy was kept). Sessions live in memory: restarting the
console signs everyone out. Ids are stored hashed, so even this table does not hold cookies
that could be replayed; the table is bounded (the oldest session goes first)."""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_TTL_S = 8 * 3600.0  # a working day, then sign in again
DEFAULT_IDLE_S = 3600.0  # an hour without a request ends a session sooner
DEFAULT_MAX_SESSIONS = 10_000


@dataclass
class Session:
    api_key: str
    expires_at: float  # absolute: no activity extends it
    last_seen: float


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class SessionStore:
    """Session id → API key, each ended by sign-out, by `ttl_s` after sign-in, or by
    `idle_s` without use."""

    def __init__(
        self,
        ttl_s: float = DEFAULT_TTL_S,
        idle_s: float = DEFAULT_IDLE_S,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s <= 0 or idle_s <= 0 or max_sessions < 1:
            raise ValueError("session lifetimes and the session cap must be positive")
        self.ttl_s = ttl_s
        self.idle_s = idle_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()  # oldest sign-in first

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, api_key: str) -> str:
        """A new session for `api_key`; its id (the cookie's value)."""
        self._expire()
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        self._sessions[_digest(session_id)] = Session(api_key, now + self.ttl_s, now)
        return session_id

    def api_key(self, session_id: str | None) -> str | None:
        """The key of a live session (and the session counts as used), else None."""
        if not session_id:
            return None
        digest = _digest(session_id)
        session = self._sessions.get(digest)
        if session is None:
            return None
        now = self._clock()
        if now >= session.expires_at or now - session.last_seen >= self.idle_s:
            del self._sessions[digest]
            return None
        session.last_seen = now
        return session.api_key

    def end(self, session_id: str | None) -> bool:
        """Ends a session (sign-out); False when there was none such."""
        if not session_id:
            return False
        return self._sessions.pop(_digest(session_id), None) is not None

    def _expire(self) -> None:
        now = self._clock()
        dead = [
            d
            for d, s in self._sessions.items()
            if now >= s.expires_at or now - s.last_seen >= self.idle_s
        ]
        for digest in dead:
            del self._sessions[digest]
