"""A thread that LISTENs on a Postgres channel and calls back on each NOTIFY, so changes to
metadata (MetadataFollower) or security (Authorizer) spread without waiting for a poll."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from cluster.duty import FailurePolicy
from metadata.db import NOTIFY_CHANNEL


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL as plain libpq connection string psycopg accepts."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class MetadataListener:
    """A daemon thread holding `LISTEN <channel>`; reconnects after errors.

    `connected` is set while LISTEN holds (after the catch-up call to `on_notify`), so a cache
    that trusts notifications can tell when it may not. `keepalive_s` turns on TCP keepalives
    that notice a silently dead connection within about 3 x keepalive_s."""

    def __init__(
        self,
        database_url: str,
        on_notify: Callable[[], None],
        channel: str = NOTIFY_CHANNEL,
        on_payload: Callable[[str], None] | None = None,
        keepalive_s: int | None = None,
    ) -> None:
        """`on_notify` runs on (re)connecting, when anything may have changed unheard; each
        NOTIFY runs `on_payload` with its payload if given, else `on_notify`."""
        self._url = libpq_url(database_url)
        self._channel = channel
        self._on_notify = on_notify
        self._on_payload = on_payload
        self._keepalive: dict[str, Any] = (
            {}
            if keepalive_s is None
            else {
                "keepalives": 1,
                "keepalives_idle": keepalive_s,
                "keepalives_interval": keepalive_s,
                "keepalives_count": 2,
            }
        )
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"listen-{channel}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.connected.clear()

    def _run(self) -> None:
        # Postgres away: one line, reconnect; a bug: its traceback, counted (cluster/duty.py).
        policy = FailurePolicy("metadata-listener", 1.0)
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self._url, autocommit=True, connect_timeout=5, **self._keepalive
                ) as conn:
                    conn.execute(f"LISTEN {self._channel}")
                    policy.succeeded()
                    self._on_notify()  # changes may have happened while we were not listening
                    self.connected.set()
                    while not self._stop.is_set():
                        for n in conn.notifies(timeout=1.0, stop_after=1):
                            if self._on_payload is not None:
                                self._on_payload(n.payload)
                            else:
                                self._on_notify()
                self.connected.clear()
            except Exception as exc:  # the policy tells an outage from a bug
                self.connected.clear()
                if not self._stop.is_set():
                    policy.failed(exc)  # logs it: one line for an outage, a traceback for a bug
                    self._stop.wait(1.0)
