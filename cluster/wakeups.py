"""What wakes an idle worker (Kafka's RLMTask is scheduled per partition; here one worker
serves every partition, so it sleeps until Postgres says there is work):

- a NOTIFY on the worker's channel: for tiering `tierlog_segments` (migration 0015: a segment
  registered, released, or the one below it tiered — the events that make a segment
  claimable); for compaction `tierlog_erasure_work` (a replica finished its hot erasure pass,
  which may make a partition's cold pass due);
- the next deadline only the clock reaches (tiering: a released segment's retry_at, a claim's
  lease running out), which the worker reads from Postgres after each turn;
- a slow safety-net timer (the role's poll_ms), should a notification be lost.

The listener holds one connection that sends no queries while idle.
"""

from __future__ import annotations

import threading

from sqlalchemy.engine import Engine

from cluster.notify_hub import NotifyHub

STOP_CHECK_S = 0.5  # how soon a stop request ends a wait (no query is sent meanwhile)


class Wakeups:
    def __init__(self, engine: Engine, channel: str) -> None:
        self._event = threading.Event()
        self._event.set()  # the first turn runs at once
        url = engine.url.render_as_string(hide_password=False)
        self._listener = NotifyHub(url).subscribe(channel, self._event.set)

    def start(self) -> None:
        self._listener.start()

    def stop(self) -> None:
        self._listener.stop()

    def clear(self) -> None:
        """A turn begins: what is notified from now on asks for another one."""
        self._event.clear()

    def wait(self, timeout_s: float, stop: threading.Event, *, notified: bool = True) -> None:
        """Until a notification (unless `notified` is False: backing off after an outage),
        `timeout_s` or `stop`."""
        remaining = timeout_s
        while remaining > 0 and not stop.is_set():
            step = min(STOP_CHECK_S, remaining)
            if notified:
                if self._event.wait(step):
                    return
            else:
                stop.wait(step)
            remaining -= step
