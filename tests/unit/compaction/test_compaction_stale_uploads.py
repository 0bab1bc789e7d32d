"""Which open multipart uploads the compaction role aborts: only those older than stale_ms."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from coldstore.object_store import IncompleteUpload, ObjectStore, ObjectStoreConfig
from compaction.stale_uploads import StaleUploads

HOUR = 3_600_000


class OpenUploads:
    """The two calls StaleUploads makes, over a list (the age rule, not S3, is under test)."""

    def __init__(self, ages_h: list[float]) -> None:
        now = datetime.now(UTC)
        self.open = [
            IncompleteUpload(
                f"p/topics/t/partition=0/{i}.parquet", f"u{i}", now - timedelta(hours=h)
            )
            for i, h in enumerate(ages_h)
        ]
        self.prefixes: list[str] = []

    def incomplete_uploads(self, prefix: str) -> Iterator[IncompleteUpload]:
        self.prefixes.append(prefix)
        return iter(list(self.open))

    def abort_upload(self, upload: IncompleteUpload) -> None:
        self.open.remove(upload)


def _sweeper(store: OpenUploads, stale_ms: int, every_s: float = 600) -> StaleUploads:
    config = ObjectStoreConfig(bucket="b", prefix="p")
    return StaleUploads(cast(ObjectStore, cast(Any, store)), config, stale_ms, every_s)


def test_only_uploads_older_than_the_limit_are_aborted() -> None:
    store = OpenUploads([0.1, 5, 30, 50])
    assert _sweeper(store, 24 * HOUR).run_once() == 2
    assert sorted(u.upload_id for u in store.open) == ["u0", "u1"]
    assert store.prefixes == ["p/topics/"]  # only the topics' tables


def test_listing_at_most_once_per_interval_unless_forced() -> None:
    store = OpenUploads([30])
    sweeper = _sweeper(store, 24 * HOUR, every_s=3600)
    assert sweeper.run_once() == 1
    store.open.append(IncompleteUpload("k", "late", datetime.now(UTC) - timedelta(days=3)))
    assert sweeper.run_once() == 0 and len(store.prefixes) == 1
    assert sweeper.run_once(force=True) == 1
