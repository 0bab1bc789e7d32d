"""The cold tier's file list, from the topic's Delta log or from the Postgres manifest (§4).

Both give the same facts per data file: its key, partition, size and min/max offset and
timestamp. The Delta log is what any Delta reader sees (no Postgres needed); the manifest is
one indexed query, and is what local retention trusts: the brokers keep every hot segment
until the manifest holds it, so planning the hot/cold seam from either is safe (a file in
Delta but not yet in the manifest only moves the seam up; its records are in both).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import NamedTuple

from coldstore.layout import table_key, table_uri
from spark_tables.options import SourceOptions

# deltalake, SQLAlchemy and the metadata layer are imported where a listing is made, not at
# module import: Spark tasks import this module, and most never list files.


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class ColdFileInfo(NamedTuple):
    key: str  # the object's whole bucket key
    partition: int
    size: int
    min_offset: int | None  # inclusive; None = no statistics (never pruned)
    max_offset: int | None
    min_timestamp: int | None  # ms since the epoch
    max_timestamp: int | None
    records: int | None


class ColdListing(NamedTuple):
    files: list[ColdFileInfo]  # by partition, then offset
    partition_count: int | None  # the topic's, when the source knows it (manifest)

    def by_partition(self) -> dict[int, list[ColdFileInfo]]:
        out: dict[int, list[ColdFileInfo]] = {}
        for f in self.files:
            out.setdefault(f.partition, []).append(f)
        return out


def cold_end(files: Iterable[ColdFileInfo]) -> int | None:
    """The offset after the partition's last cold record (None: nothing cold). Tiering
    commits a partition's files in offset order, so everything below it is cold."""
    ends = [f.max_offset + 1 for f in files if f.max_offset is not None]
    return max(ends) if ends else None


def list_cold_files(opts: SourceOptions, partitions: Iterable[int] | None = None) -> ColdListing:
    if opts.plan_from == "manifest":
        return _from_manifest(opts, partitions)
    return _from_delta(opts)


def _from_delta(opts: SourceOptions) -> ColdListing:
    # deltalake directly, not coldstore.delta_table: that module pulls in the Parquet writer
    # and the record codecs (~1 s of imports in every planning worker Spark starts).
    import pyarrow as pa
    from deltalake import DeltaTable

    root, uri = table_key(opts.store, opts.topic), table_uri(opts.store, opts.topic)
    storage = opts.store.storage_options()
    if not DeltaTable.is_deltatable(uri, storage):
        return ColdListing([], None)
    rows = pa.table(DeltaTable(uri, storage_options=storage).get_add_actions(flatten=True))
    files = [
        ColdFileInfo(
            _key(root, opts.store.bucket, r["path"]),
            int(r["partition.partition"]),
            int(r["size_bytes"]),
            r.get("min.offset"),
            r.get("max.offset"),
            _ms(r.get("min.timestamp")),
            _ms(r.get("max.timestamp")),
            r.get("num_records"),
        )
        for r in rows.to_pylist()
    ]
    files.sort(key=lambda f: (f.partition, -1 if f.min_offset is None else f.min_offset, f.key))
    return ColdListing(files, None)


def _ms(value: dt.datetime | None) -> int | None:
    """A stats timestamp (deltalake gives datetimes) → ms since the epoch."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - _EPOCH) // dt.timedelta(milliseconds=1)


def _key(root: str, bucket: str, path: str) -> str:
    """An add action's path (relative to the table, or an absolute URI) → bucket key."""
    for scheme in ("s3://", "s3a://"):
        if path.startswith(f"{scheme}{bucket}/"):
            return path[len(scheme) + len(bucket) + 1 :]
    return f"{root}/{path}" if root else path


def _from_manifest(opts: SourceOptions, partitions: Iterable[int] | None) -> ColdListing:
    from metadata.cold_manifest import ColdManifest
    from metadata.db import make_engine
    from metadata.topics import TopicRepo
    from metadata.types import TopicIdPartition

    assert opts.database_url is not None
    engine = make_engine(opts.database_url)
    try:
        topic = TopicRepo(engine).get(opts.topic)
        if topic is None:
            return ColdListing([], None)
        manifest = ColdManifest(engine)
        wanted = range(topic.partition_count) if partitions is None else sorted(set(partitions))
        files = [
            ColdFileInfo(
                f.object_key,
                f.partition,
                f.size_bytes,
                f.base_offset,
                f.last_offset,
                f.min_timestamp,
                f.max_timestamp,
                f.records,
            )
            for p in wanted
            if p < topic.partition_count
            for f in manifest.files(TopicIdPartition(topic.id, p))
        ]
        return ColdListing(files, topic.partition_count)
    finally:
        engine.dispose()
