"""One LISTEN connection per node: every Postgres channel it follows, on one sleeping thread.

Postgres NOTIFYs tell a node's caches that metadata, security, cold files, erasures or the
Schema Registry changed. A connection and a polling thread per channel cost a broker five
Postgres sessions and a few thousand wake-ups a minute for nothing. Here a node's hub holds
one connection LISTENing on every channel subscribed, and its thread sleeps in select()
until a notification, a subscription starting or stopping, or a lost connection wakes it.

A subscription's `connected` is set once its channel is LISTENed and its catch-up call to
`on_notify` has run (changes may have happened while nothing listened); it is clear while
the connection is down, so a cache that trusts notifications can tell when it may not. TCP
keepalives notice a silently dead connection within about 3 x keepalive_s. The connection
lives while any subscription is started: a broker's is the session that says its process
lives (metadata/brokers.py session_name), so the death signal, stopped last, ends it.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import pq
from sqlalchemy.engine import make_url

from cluster.duty import FailurePolicy
from metadata.erasures import READER_LISTEN_KEEPALIVE_S

log = logging.getLogger("tierlog.notify_hub")

# A dead connection is noticed in ~3 s, after which caches stop trusting notifications: the
# bound an erasure's cold rewrite waits for (metadata/erasures.py).
KEEPALIVE_S = READER_LISTEN_KEEPALIVE_S
RECONNECT_PAUSE_S = 1.0


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL as plain libpq connection string psycopg accepts."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class Subscription:
    """One component's interest in one channel; its callbacks run on the hub's thread and
    must not block (they set flags or hand work to an event loop)."""

    def __init__(
        self,
        hub: NotifyHub,
        channel: str,
        on_notify: Callable[[], None],
        on_payload: Callable[[str], None] | None,
    ) -> None:
        self.channel = channel
        self.on_notify = on_notify
        self.on_payload = on_payload
        self.connected = threading.Event()
        self._hub = hub

    def start(self) -> None:
        """Listen from now on: `on_notify` runs once the channel is LISTENed (the catch-up)."""
        self._hub.started(self)

    def stop(self) -> None:
        self.connected.clear()
        self._hub.stopped(self)

    def deliver(self, payload: str) -> None:
        if self.on_payload is not None:
            self.on_payload(payload)
        else:
            self.on_notify()


class NotifyHub:
    """A node's LISTEN connection, shared by its subscriptions; reconnects after errors."""

    def __init__(self, database_url: str, keepalive_s: int = KEEPALIVE_S) -> None:
        self._url = libpq_url(database_url)
        self.keepalive_s = keepalive_s
        self._keepalive: dict[str, Any] = {
            "keepalives": 1,
            "keepalives_idle": keepalive_s,
            "keepalives_interval": keepalive_s,
            "keepalives_count": 2,
        }
        self._lock = threading.Lock()
        self._active: list[Subscription] = []
        self._due: list[Subscription] = []  # started, not yet caught up on this connection
        self._thread: threading.Thread | None = None
        # What wakes the thread's select(): made at the first start, closed with the hub
        # (sockets close their descriptors when collected; a pipe's would leak).
        self._wakeup: tuple[socket.socket, socket.socket] | None = None

    def subscribe(
        self,
        channel: str,
        on_notify: Callable[[], None],
        on_payload: Callable[[str], None] | None = None,
    ) -> Subscription:
        """`on_notify` runs on (re)connecting, when anything may have changed unheard; each
        NOTIFY runs `on_payload` with its payload if given, else `on_notify`. Nothing is
        heard until the subscription starts."""
        if not channel.isidentifier():
            raise ValueError(f"not a channel name: {channel!r}")
        return Subscription(self, channel, on_notify, on_payload)

    def started(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._active:
                return
            self._active.append(sub)
            self._due.append(sub)
            if self._wakeup is None:
                self._wakeup = socket.socketpair()
                for end in self._wakeup:
                    end.setblocking(False)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="listen", daemon=True)
                self._thread.start()
        self._wake()

    def stopped(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._active:
                self._active.remove(sub)
            if sub in self._due:
                self._due.remove(sub)
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is None:
            return
        with contextlib.suppress(BlockingIOError):  # full: the thread has wake-ups enough
            self._wakeup[1].send(b"x")

    @property
    def _wake_r(self) -> socket.socket:
        assert self._wakeup is not None  # made before the thread starts
        return self._wakeup[0]

    def _subscribed(self) -> bool:
        with self._lock:
            if not self._active:
                self._thread = None  # the next start begins a thread of its own
            return bool(self._active)

    def _run(self) -> None:
        # Postgres away: one line, reconnect; a bug: its traceback, counted (cluster/duty.py).
        policy = FailurePolicy("notify-hub", RECONNECT_PAUSE_S)
        while self._subscribed():
            try:
                with psycopg.connect(
                    self._url, autocommit=True, connect_timeout=5, **self._keepalive
                ) as conn:
                    policy.succeeded()
                    self._serve(conn)
            except Exception as exc:  # the policy tells an outage from a bug
                self._disconnected()
                with self._lock:
                    active = bool(self._active)
                if active:
                    policy.failed(exc)  # logs it: one line for an outage, a traceback for a bug
                    self._sleep(RECONNECT_PAUSE_S)

    def _serve(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """LISTEN and dispatch until no subscription is left (or the connection fails)."""
        conn.add_notify_handler(lambda n: self._dispatch(n.channel, n.payload))
        with self._lock:
            self._due = list(self._active)  # a new connection: everyone catches up
        listened: set[str] = set()
        encoding = conn.info.encoding
        while True:
            with self._lock:
                if not self._active:
                    return
                due, self._due = self._due, []
                channels = {s.channel for s in self._active}
            for channel in sorted(channels - listened):
                conn.execute(f"LISTEN {channel}")
                listened.add(channel)
            for sub in due:
                sub.on_notify()  # after LISTEN: nothing between is missed
                sub.connected.set()
                with self._lock:
                    if sub not in self._active:  # stopped meanwhile
                        sub.connected.clear()
            self._wait(conn.pgconn, encoding)

    def _wait(self, pgconn: pq.abc.PGconn, encoding: str) -> None:
        """Sleep until the server sends something or a wake-up comes; dispatch what came."""
        wake = self._wake_r.fileno()
        readable, _, _ = select.select([pgconn.socket, wake], [], [])
        if wake in readable:
            self._drain_wakes()
        if pgconn.socket in readable:
            pgconn.consume_input()  # raises when the connection is lost
            if pgconn.status != pq.ConnStatus.OK:
                raise psycopg.OperationalError("the LISTEN connection was lost")
            while (n := pgconn.notifies()) is not None:
                self._dispatch(n.relname.decode(encoding), n.extra.decode(encoding))

    def _dispatch(self, channel: str, payload: str) -> None:
        with self._lock:
            subs = [s for s in self._active if s.channel == channel]
        for sub in subs:
            sub.deliver(payload)

    def _disconnected(self) -> None:
        with self._lock:
            subs = list(self._active)
        for sub in subs:
            sub.connected.clear()

    def _sleep(self, seconds: float) -> None:
        """A pause a stop ends early (the wake-up pipe)."""
        readable, _, _ = select.select([self._wake_r], [], [], seconds)
        if readable:
            self._drain_wakes()

    def _drain_wakes(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(512):
                pass
