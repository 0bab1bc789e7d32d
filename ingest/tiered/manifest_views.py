"""Each hosted tiered partition's view of its cold manifest (tiered end, cold log start, the
log start DeleteRecords set), kept between local-retention passes and read from Postgres
again only for a partition a NOTIFY names (migrations 0015, 0016: a cold file of it committed
or removed, or its DeleteRecords start moved, the only changes that move these offsets), or
once the view is `max_age_s` old (a safety net, should a notification be lost). Before, every
pass asked Postgres twice per hosted tiered partition, every second, whether anything had
changed.

`changed` runs on the listener's thread; `read` on a worker thread (it blocks on Postgres).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import NamedTuple

from failures.logged import log_failure
from ingest.tiered.seams import ColdManifestApi
from metadata.db_errors import POSTGRES_DOWN
from metadata.types import TopicIdPartition

log = logging.getLogger("tierlog.remote_log")

MAX_AGE_S = 30.0


class ManifestView(NamedTuple):
    tiered_end: int | None
    log_start: int | None  # what cold retention left
    deleted_before: int | None = None  # the log start DeleteRecords set


class ManifestViews:
    def __init__(
        self,
        manifest: ColdManifestApi,
        monotonic: Callable[[], float],
        max_age_s: float = MAX_AGE_S,
    ) -> None:
        self._manifest, self._monotonic, self._max_age_s = manifest, monotonic, max_age_s
        self._views: dict[TopicIdPartition, tuple[ManifestView, float]] = {}
        self._lock = threading.Lock()
        self._changed: set[TopicIdPartition] = set()
        self._generation = 0  # moved by changed_all: a read begun before it is stale
        self.reads = 0  # partitions read from Postgres, in all (tests, logs)

    def changed(self, payload: str) -> None:
        """A NOTIFY's payload, `topic_id:partition`: that partition's view is stale."""
        topic_id, _, partition = payload.rpartition(":")
        if topic_id and partition.isdigit():
            with self._lock:
                self._changed.add(TopicIdPartition(topic_id, int(partition)))
        else:
            self.changed_all()

    def changed_all(self) -> None:
        """Anything may have changed (the listener reconnected): every view is stale."""
        with self._lock:
            self._views.clear()
            self._generation += 1

    def read(self, keys: Iterable[TopicIdPartition]) -> dict[TopicIdPartition, ManifestView]:
        """The views of `keys`; a partition whose view could not be read (Postgres away) is
        left out, and so is every one after it: nothing is decided for them this pass."""
        keys = list(keys)
        with self._lock:  # taken before reading: a change notified meanwhile reads again
            changed, self._changed = self._changed, set()
            generation = self._generation
            for tp in [k for k in self._views if k not in keys]:
                del self._views[tp]  # no longer hosted
        now = self._monotonic()
        out: dict[TopicIdPartition, ManifestView] = {}
        for tp in keys:
            cached = self._views.get(tp)
            if cached is not None and tp not in changed and now - cached[1] < self._max_age_s:
                out[tp] = cached[0]
                continue
            try:
                view = ManifestView(
                    self._manifest.tiered_end_offset(tp),
                    self._manifest.log_start_offset(tp),
                    self._manifest.deleted_before(tp),
                )
            except POSTGRES_DOWN as exc:  # no deletion this turn (a bug: the duty's)
                log_failure(log, "reading the cold manifest failed", exc)
                with self._lock:
                    self._changed |= {tp, *(k for k in keys if k in changed)}
                break
            self.reads += 1
            with self._lock:
                # Not kept if the listener reconnected meanwhile: what it missed while away
                # may be newer than this read, and its catch-up cleared the views before
                # this one would land (kept, it would stand until max_age_s).
                if generation == self._generation:
                    self._views[tp] = (view, now)
            out[tp] = view
        return out
