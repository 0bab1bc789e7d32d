"""Aborting multipart uploads that no process will finish (S3's
AbortIncompleteMultipartUpload lifecycle rule, done by the compaction role so it works on any
S3-compatible store without configuring one).

A tiering worker or a rewrite killed mid-upload leaves its upload open: the parts stay
stored, out of sight of every listing of objects. The manifest already treats the object
as garbage (its row is copy_started and is superseded); this sweep reclaims the parts. An
upload counts as abandoned once it is older than `stale_ms`, far longer than any live upload
of a segment or a rewritten file takes.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from coldstore.object_store import ObjectStore, ObjectStoreConfig
from compaction import metrics

log = logging.getLogger("tierlog.compaction")


class StaleUploads:
    def __init__(
        self, store: ObjectStore, config: ObjectStoreConfig, stale_ms: int, every_s: float
    ) -> None:
        self.store, self.stale_ms, self.every_s = store, stale_ms, every_s
        self.prefix = config.key("topics") + "/"
        self._next = 0.0  # monotonic time of the next listing

    def run_once(self, force: bool = False) -> int:
        """Abort the abandoned uploads (at most one listing per `every_s`); returns how many."""
        if not force and time.monotonic() < self._next:
            return 0
        self._next = time.monotonic() + self.every_s
        cutoff = datetime.now(UTC) - timedelta(milliseconds=self.stale_ms)
        aborted = 0
        for upload in self.store.incomplete_uploads(self.prefix):
            if upload.initiated > cutoff:
                continue
            self.store.abort_upload(upload)
            aborted += 1
            log.info(
                "aborted an abandoned multipart upload",
                extra={"key": upload.key, "initiated": upload.initiated.isoformat()},
            )
        metrics.ABORTED_UPLOADS.inc(aborted)
        return aborted
