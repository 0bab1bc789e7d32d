"""The invariants a tiering run must leave behind, checked on the real table, manifest and bucket.

Shared by the crash and S3-fault tests: whatever went wrong on the way (a worker killed at any
step, S3 answering 500/503 or not at all), once every segment is tiered the Delta table, the
Postgres manifest and the bucket must tell one story.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import table_key, table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.segment_registry import COLD_STATES, ColdFile, SegmentRegistry
from metadata.types import TopicIdPartition


def all_rows(engine: Engine, topic_id: str, partitions: int) -> list[ColdFile]:
    """Every manifest row of the topic, whatever its state."""
    manifest = ColdManifest(engine)
    return [
        f
        for p in range(partitions)
        for f in manifest.files(TopicIdPartition(topic_id, p), states=COLD_STATES)
    ]


def assert_consistent(
    engine: Engine,
    config: ObjectStoreConfig,
    topic: str,
    topic_id: str,
    partitions: int,
    *,
    deletes_may_fail: bool = False,
) -> None:
    """Every segment tiered; Delta, manifest and bucket agree; abandoned attempts are gone.

    With `deletes_may_fail`, an abandoned attempt's object may still be in the bucket, its
    row delete_started (the worker's clean-up failed: retention's sweep finishes it), but
    every object must still be one the manifest knows. (Each offset exactly once, byte for
    byte, is Env.assert_exact's job: it reads the rows.)
    """
    registry = SegmentRegistry(engine)
    for p in range(partitions):
        segs = registry.segments(TopicIdPartition(topic_id, p))
        assert [s.state for s in segs] == ["tiered"] * len(segs), segs

    table = DeltaTopicTable(table_uri(config, topic), config.storage_options(), topic=topic)
    root = table_key(config, topic)
    in_delta = {f"{root}/{f.path}": f for f in table.files()}
    rows = all_rows(engine, topic_id, partitions)
    committed = {r.object_key: r for r in rows if r.state == "committed"}
    # The manifest lists exactly the table's files, with the same offset ranges.
    assert set(committed) == set(in_delta)
    for key, row in committed.items():
        d = in_delta[key]
        assert (d.partition, d.min_offset, d.max_offset, d.records, d.size) == (
            row.partition,
            row.base_offset,
            row.last_offset,
            row.records,
            row.size_bytes,
        ), key
    # One file per segment: no segment was committed twice under two keys.
    for p in range(partitions):
        ranges = [
            (s.base_offset, s.end_offset - 1)
            for s in registry.segments(TopicIdPartition(topic_id, p))
        ]
        files = sorted(
            (r.base_offset, r.last_offset) for r in committed.values() if r.partition == p
        )
        assert files == ranges, (p, files, ranges)
    # Abandoned attempts end deleted: never left half-way, never visible.
    allowed = {"committed", "deleted"} | ({"delete_started"} if deletes_may_fail else set())
    leftovers = [r for r in rows if r.state not in allowed]
    assert leftovers == [], leftovers
    # The bucket holds the table's data files, none missing, and no orphan left behind
    # (or, if deletes may fail, only objects whose deletion the manifest has recorded).
    store = ObjectStore(config)
    try:
        objects = {k: size for k, size in store.list(root + "/") if "/_delta_log/" not in k}
    finally:
        store.close()
    expected = {k: r.size_bytes for k, r in committed.items()}
    if deletes_may_fail:
        pending = {r.object_key: r.size_bytes for r in rows if r.state == "delete_started"}
        expected |= {k: size for k, size in pending.items() if k in objects}
    assert objects == expected


def files_per_commit(config: ObjectStoreConfig, topic: str) -> list[int]:
    """The number of data files each commit of the topic's Delta log added, in log order:
    what the tests check to know that the worker really committed batches."""
    store = ObjectStore(config)
    try:
        log = sorted(
            k
            for k, _ in store.list(f"{table_key(config, topic)}/_delta_log/")
            if k.endswith(".json")
        )
        return [
            sum(1 for line in store.get(k).decode().splitlines() if line.startswith('{"add"'))
            for k in log
        ]
    finally:
        store.close()
