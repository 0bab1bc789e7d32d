"""A broker's cold manifest views (ingest/tiered/manifest_views.py): read from Postgres once,
and again only for the partition a NOTIFY names when one of its cold files is committed or
removed (migration 0015), on a real Postgres, through the real tiering and retention calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy.engine import Engine

from cluster.notify_hub import NotifyHub
from ingest.tiered.manifest_views import ManifestView, ManifestViews
from metadata.brokers import BrokerRepo
from metadata.cold_manifest import COLD_FILES_CHANNEL, ColdManifest
from metadata.segment_registry import SegmentRegistry
from metadata.topics import TopicRepo
from metadata.types import FileSpec, TopicIdPartition

DEADLINE_S = 20.0


def wait_until(what: str, cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
        time.sleep(0.05)


@pytest.fixture
def views(db_engine: Engine) -> Iterator[ManifestViews]:
    views = ManifestViews(ColdManifest(db_engine), time.monotonic, max_age_s=3600)
    url = db_engine.url.render_as_string(hide_password=False)
    listening = threading.Event()

    def connected() -> None:  # (re)connected: everything stale, as the broker wires it
        views.changed_all()
        listening.set()

    listener = NotifyHub(url).subscribe(COLD_FILES_CHANNEL, connected, views.changed)
    listener.start()
    assert listening.wait(DEADLINE_S)
    yield views
    listener.stop()


def tier(engine: Engine, tp: TopicIdPartition, base: int, end: int) -> int:
    """One segment through the tiering calls: registered, claimed, copied, committed."""
    registry, manifest = SegmentRegistry(engine), ColdManifest(engine)
    registry.register_sealed(tp, base, end, 100)
    (claim,) = registry.claim("w", 60_000)
    spec = FileSpec(f"k-{tp.partition}-{base}", 100, end - base, 1, 2)
    file_id = manifest.start_copy(claim, spec)
    manifest.mark_copied(file_id)
    registry.mark_tiered(claim, spec, 1)
    return file_id


def test_views_are_read_again_only_for_the_partition_a_notify_names(
    db_engine: Engine, views: ManifestViews
) -> None:
    BrokerRepo(db_engine).register(1, "http://127.0.0.1:1", 600_000)
    topic_id = TopicRepo(db_engine).create("viewed", 2, 1).id
    p0, p1 = TopicIdPartition(topic_id, 0), TopicIdPartition(topic_id, 1)
    assert views.read([p0, p1]) == {p0: ManifestView(None, None), p1: ManifestView(None, None)}
    reads = views.reads
    assert views.read([p0, p1])[p0] == ManifestView(None, None)
    assert views.reads == reads  # nothing changed: nothing asked

    file_id = tier(db_engine, p0, 0, 10)
    wait_until("p0 read again", lambda: views.read([p0, p1])[p0] == ManifestView(10, 0))
    assert views.read([p0, p1])[p1] == ManifestView(None, None)
    assert views.reads == reads + 1  # p0 once, on its notification; p1 never

    ColdManifest(db_engine).start_delete([file_id])  # retention removed it: log start moves
    wait_until("p0's removal seen", lambda: views.read([p0])[p0] == ManifestView(None, 10))


def test_a_view_read_across_a_reconnect_is_not_kept(db_engine: Engine) -> None:
    """The listener's catch-up (changed_all, on every reconnect) lands while a read is
    under way: what that read got may predate a change notified while the listener was
    away, so it answers this pass but is read again on the next one."""
    BrokerRepo(db_engine).register(1, "http://127.0.0.1:1", 600_000)
    topic_id = TopicRepo(db_engine).create("reconnected", 1, 1).id
    p0 = TopicIdPartition(topic_id, 0)
    manifest = ColdManifest(db_engine)

    class ReconnectMidRead:
        """The manifest as the views see it; the listener reconnects during the read."""

        def tiered_end_offset(self, tp: TopicIdPartition) -> int | None:
            end = manifest.tiered_end_offset(tp)
            views.changed_all()  # the catch-up, after this read's answer was taken
            return end

        def log_start_offset(self, tp: TopicIdPartition) -> int | None:
            return manifest.log_start_offset(tp)

        def deleted_before(self, tp: TopicIdPartition) -> int | None:
            return manifest.deleted_before(tp)

    views = ManifestViews(ReconnectMidRead(), time.monotonic, max_age_s=3600)
    assert views.read([p0]) == {p0: ManifestView(None, None)}
    tier(db_engine, p0, 0, 10)  # notified while the listener was away: never heard
    assert views.read([p0]) == {p0: ManifestView(10, 0)}  # read again, not the old view
    assert views.reads == 2
