"""Segment → Parquet → S3 → Delta commit, against moto's real HTTP server.

Covers docs/design.md §4: partitioned table, add actions referencing uploaded files (never
rewritten),
idempotent retries through the Delta txn action, concurrent writers via S3 conditional put.
"""

from __future__ import annotations

import datetime as dt_mod
import json
import threading

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from coldstore.delta_table import DeltaTopicTable, PendingFile, app_id
from coldstore.layout import data_file_key, table_key, table_uri
from coldstore.object_store import ObjectStore
from coldstore.parquet_writer import ParquetFile, write_parquet
from logformat.frame import encode_frame
from logformat.records import build_batch
from logformat.schema import CONSUMER_SCHEMA
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401

T0 = 1_700_000_000_000
TOPIC = "orders"


def segment_bytes(base: int, n: int, per_frame: int = 7) -> bytes:
    frames, offset = [], base
    while offset < base + n:
        k = min(per_frame, base + n - offset)
        batch = build_batch(
            [None if i % 5 == 0 else f"key-{offset + i}".encode() for i in range(k)],
            [
                None if i % 6 == 3 else f"välue-{offset + i}".encode() + b"\x00\xff"
                for i in range(k)
            ],
            [
                [{"key": "h", "value": str(offset + i).encode()}] if i % 2 else None
                for i in range(k)
            ],
            [T0 + offset + i for i in range(k)],
            T0,
        )
        frames.append(bytes(encode_frame(batch, base_offset=offset, compression="zstd")))
        offset += k
    return b"".join(frames)


def upload(store: ObjectStore, config, partition: int, base: int, n: int):
    pf = write_parquet(segment_bytes(base, n), row_group_bytes=4096)
    key = data_file_key(config, TOPIC, partition, base)
    assert isinstance(pf.output, bytes)
    store.put(key, pf.output)
    return pf, key


def expected_table(pieces: list[tuple[int, ParquetFile]]) -> pa.Table:
    tables = []
    for partition, pf in pieces:
        assert isinstance(pf.output, bytes)
        t = pq.read_table(pa.BufferReader(pf.output))
        tables.append(t.append_column("partition", pa.array([partition] * t.num_rows, pa.int32())))
    return pa.concat_tables(tables)


def _iso(ms: int) -> str:
    return dt_mod.datetime.fromtimestamp(ms / 1000, dt_mod.UTC).isoformat()


def normalized(t: pa.Table) -> list[dict]:
    # delta-rs reads Delta timestamps as microseconds: compare at the Parquet's ms precision.
    t = t.select(["partition", *CONSUMER_SCHEMA.names])
    t = t.set_column(2, "timestamp", pc.cast(t.column("timestamp"), pa.timestamp("ms", "UTC")))
    return t.sort_by([("partition", "ascending"), ("offset", "ascending")]).to_pylist()


@pytest.fixture
def env(s3_bucket):
    store = ObjectStore(s3_bucket)
    table = DeltaTopicTable(table_uri(s3_bucket, TOPIC), s3_bucket.storage_options())
    table.ensure_created()
    return s3_bucket, store, table


def read_back(config) -> DeltaTable:
    return DeltaTable(table_uri(config, TOPIC), storage_options=config.storage_options())


def test_commit_two_partitions_read_back(env):
    config, store, table = env
    pieces = []
    for partition, base, n in [(0, 0, 40), (1, 0, 25), (0, 40, 30), (1, 25, 3)]:
        pf, key = upload(store, config, partition, base, n)
        table.commit_file(partition, pf, key)
        pieces.append((partition, pf))
    dt = read_back(config)
    got = dt.to_pyarrow_table()
    assert "partition" in got.column_names
    assert got.schema.field("partition").type == pa.int32()
    assert normalized(got) == normalized(expected_table(pieces))
    assert dt.metadata().partition_columns == ["partition"]
    assert dt.transaction_version(app_id(TOPIC, 0)) == 40
    assert dt.transaction_version(app_id(TOPIC, 1)) == 25
    # The file is referenced, not rewritten: same object, same bytes.
    files = table.files()
    assert len(files) == 4
    prefix = table_key(config, TOPIC) + "/"
    for f, (partition, pf) in zip(
        sorted(files, key=lambda f: (f.partition, f.min_offset)),
        sorted(pieces, key=lambda x: (x[0], x[1].base_offset)),
        strict=True,
    ):
        assert f.partition == partition and f.size == pf.size_bytes == store.head(prefix + f.path)
        assert store.get(prefix + f.path) == pf.output
        assert (f.records, f.min_offset, f.max_offset) == (
            pf.records,
            pf.base_offset,
            pf.last_offset,
        )
        assert (f.min_timestamp, f.max_timestamp) == (pf.min_timestamp, pf.max_timestamp)
    # Pruning by the add actions' stats: only the file holding offset 50 of partition 0.
    hit = dt.file_uris(file_pruning_predicate="partition = 0 AND offset = 50")
    assert len(hit) == 1 and "/partition=0/00000000000000000040-" in hit[0]
    # ... and on timestamp: record o of these segments has timestamp T0 + o.
    hit = dt.file_uris(file_pruning_predicate=f"timestamp >= '{_iso(T0 + 41)}'")
    assert [u.split("/")[-2] for u in hit] == ["partition=0"]
    rows = dt.to_pyarrow_table(filters=[("partition", "=", 0), ("offset", "=", 50)])
    assert rows.column("offset").to_pylist() == [50]
    # The log holds a txn action per commit: app id = topic-partition, version = base offset.
    log = [
        json.loads(line)
        for k, _ in store.list(prefix + "_delta_log/")
        if k.endswith(".json")
        for line in store.get(k).decode().splitlines()
    ]
    txns = [a["txn"] for a in log if "txn" in a]
    assert [(t["appId"], t["version"]) for t in txns] == [
        ("orders-0", 0),
        ("orders-1", 0),
        ("orders-0", 40),
        ("orders-1", 25),
    ]


def test_retry_of_same_segment_adds_nothing(env):
    config, store, table = env
    pf, key = upload(store, config, 3, 100, 10)
    v = table.commit_file(3, pf, key)
    # A worker that crashed after the commit re-does the segment: new upload, same base.
    pf2, key2 = upload(store, config, 3, 100, 10)
    assert key2 != key
    assert table.commit_file(3, pf2, key2) == v
    assert table.commit_file(3, pf, key) == v  # and the very same call again
    # A fresh process (new table object) sees the txn version in the log too.
    other = DeltaTopicTable(table_uri(config, TOPIC), config.storage_options())
    assert other.commit_file(3, pf2, key2) == v
    assert other.transaction_version(3) == 100
    assert [f.path for f in other.files()] == [key[len(table_key(config, TOPIC)) + 1 :]]
    assert read_back(config).to_pyarrow_table().num_rows == 10
    assert read_back(config).version() == v


def test_concurrent_create_and_commits(s3_bucket):
    config = s3_bucket
    store = ObjectStore(config)
    uri, opts = table_uri(config, TOPIC), config.storage_options()
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def create():
        try:
            barrier.wait()
            DeltaTopicTable(uri, opts).ensure_created()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert read_back(config).version() == 0  # exactly one create won

    # Two workers, one partition each, 4 segments each, committing at the same time; plus
    # two workers racing on one same segment of partition 2.
    prepared = {p: [upload(store, config, p, base, 5) for base in range(0, 20, 5)] for p in (0, 1)}
    dup = [upload(store, config, 2, 0, 8) for _ in range(2)]
    go = threading.Barrier(4)
    versions: list[tuple[int, int]] = []

    def worker(jobs):
        try:
            table = DeltaTopicTable(uri, opts)
            go.wait()
            for p, pf, key in jobs:
                versions.append((p, table.commit_file(p, pf, key)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    jobs = [[(p, pf, key) for pf, key in prepared[p]] for p in (0, 1)]
    jobs += [[(2, pf, key)] for pf, key in dup]
    threads = [threading.Thread(target=worker, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    dt = read_back(config)
    got = dt.to_pyarrow_table()
    assert sorted(
        zip(got["partition"].to_pylist(), got["offset"].to_pylist(), strict=True)
    ) == sorted([(p, o) for p in (0, 1) for o in range(20)] + [(2, o) for o in range(8)])
    assert len(dt.file_uris()) == 9  # 4 + 4 + exactly one of the two racing duplicates
    assert dt.version() == 9
    # Each commit reports its own version, even when others landed in between.
    own = sorted(v for p, v in versions if p != 2)
    assert len(own) == 8 and len(set(own)) == 8 and own[0] >= 1 and own[-1] <= 9
    assert [dt.transaction_version(app_id(TOPIC, p)) for p in (0, 1, 2)] == [15, 15, 0]


def test_remove_files(env):
    config, store, table = env
    pieces = [upload(store, config, 0, base, 5) for base in (0, 5, 10)]
    for pf, key in pieces:
        table.commit_file(0, pf, key)
    first_key = pieces[0][1]
    v = table.remove_files([first_key], data_change=True)
    assert [f.min_offset for f in table.files()] == [5, 10]
    dt = read_back(config)
    assert dt.version() == v
    assert sorted(dt.to_pyarrow_table()["offset"].to_pylist()) == list(range(5, 15))
    assert store.head(first_key) is not None  # logical removal only: S3 delete comes later


def test_one_commit_carries_many_partitions_and_a_retry_adds_only_what_is_missing(env):
    """commit_files: files of several partitions (and two of one) in ONE commit, one txn per
    partition at its highest base offset; a retry of a batch that partly made it in adds only
    the files the table lacks, and reports the others as already committed."""
    config, store, table = env
    batch = [
        PendingFile(0, *upload(store, config, 0, 0, 10)),
        PendingFile(1, *upload(store, config, 1, 0, 5)),
        PendingFile(0, *upload(store, config, 0, 10, 10)),
    ]
    first = table.commit_files(batch)
    assert first.already == []
    assert table.transaction_version(0) == 10 and table.transaction_version(1) == 0
    log = [json.loads(line) for line in table_log(store, config, first.version)]
    assert sum("add" in a for a in log) == 3
    assert sorted((a["txn"]["appId"], a["txn"]["version"]) for a in log if "txn" in a) == [
        ("orders-0", 10),
        ("orders-1", 0),
    ]
    # A retry by another worker: new uploads of the same segments plus one new segment.
    again = [
        PendingFile(p, *upload(store, config, p, f.parquet.base_offset, n))
        for p, f, n in ((0, batch[2], 10), (1, batch[1], 5))
    ]
    new = PendingFile(1, *upload(store, config, 1, 5, 7))
    other = DeltaTopicTable(table_uri(config, TOPIC), config.storage_options(), topic=TOPIC)
    second = other.commit_files([*again, new])
    assert [f.object_key for f in second.already] == [f.object_key for f in again]
    assert second.version == first.version + 1
    assert other.transaction_version(1) == 5
    held = other.covering(0, 10)
    assert held is not None and table.relpath(batch[2].object_key) == held.path
    rows = read_back(config).to_pyarrow_table()
    pairs = sorted(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True))
    assert pairs == [(0, i) for i in range(20)] + [(1, i) for i in range(12)]


def table_log(store: ObjectStore, config, version: int) -> list[str]:
    key = f"{table_key(config, TOPIC)}/_delta_log/{version:020d}.json"
    return store.get(key).decode().splitlines()
