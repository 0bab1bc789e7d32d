"""Shared helpers of the compaction tests (no tests here).

Topics are tiered through the tiering protocol itself — register the sealed segment, claim
it, Parquet, manifest copy_started → S3 put → copied → Delta commit → mark_tiered — minus
the HTTP download from a replica (the segment bytes are at hand), so the cold tier the
compaction worker sees is exactly what the tiering worker would have produced.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from sqlalchemy.engine import Engine

from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import data_file_key, table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from coldstore.parquet_writer import write_parquet
from compaction.jobs import Settings
from compaction.worker import CompactionWorker
from logformat.frame import encode_frame
from logformat.records import build_batch
from metadata.brokers import BrokerRepo
from metadata.cold_manifest import ColdManifest
from metadata.segment_registry import SegmentRegistry
from metadata.topics import TopicRepo
from metadata.types import FileSpec, TopicIdPartition

Rec = dict[str, Any]  # key, value, headers, ts


class ColdEnv:
    def __init__(self, engine: Engine, config: ObjectStoreConfig) -> None:
        self.engine, self.config = engine, config
        for i in (1, 2):
            BrokerRepo(engine).register(i, f"http://127.0.0.1:{9 + i}", 600_000)
        self.registry = SegmentRegistry(engine)
        self.manifest = ColdManifest(engine)
        self.store = ObjectStore(config)
        self.ids: dict[str, str] = {}
        self.written: dict[tuple[str, int], list[Rec]] = {}
        self._tables: dict[str, DeltaTopicTable] = {}

    def topic(self, name: str, partitions: int = 1, **configs: str) -> str:
        info = TopicRepo(self.engine).create(name, partitions, 2, configs)
        self.ids[name] = info.id
        return info.id

    def tier(
        self,
        topic: str,
        partition: int,
        recs: list[Rec],
        per_frame: int = 4,
        row_group_bytes: int = 16 * 1024,
    ) -> None:
        """Tier one sealed segment holding `recs` at the partition's next offsets."""
        log = self.written.setdefault((topic, partition), [])
        base = len(log)
        frames = []
        for i in range(0, len(recs), per_frame):
            chunk = recs[i : i + per_frame]
            batch = build_batch(
                [r["key"] for r in chunk],
                [r["value"] for r in chunk],
                [r.get("headers") for r in chunk],
                [r["ts"] for r in chunk],
                chunk[0]["ts"],
            )
            frames.append(bytes(encode_frame(batch, base_offset=base + i)))
        data = b"".join(frames)
        end = base + len(recs)
        tid = self.ids[topic]
        self.registry.register_sealed(TopicIdPartition(tid, partition), base, end, len(data))
        (claim,) = self.registry.claim("test-tiering", 60_000)
        assert (claim.partition, claim.base_offset) == (partition, base)
        pf = write_parquet(data, from_offset=base, to_offset=end, row_group_bytes=row_group_bytes)
        key = data_file_key(self.config, topic, partition, base)
        spec = FileSpec(key, pf.size_bytes, pf.records, pf.min_timestamp, pf.max_timestamp)
        fid = self.manifest.start_copy(claim, spec)
        assert isinstance(pf.output, bytes)
        self.store.put(key, pf.output)
        self.manifest.mark_copied(fid)
        version = self._table(topic).commit_file(partition, pf, key)
        self.registry.mark_tiered(claim, spec, version)
        log.extend(recs)

    def _table(self, topic: str) -> DeltaTopicTable:
        """Kept per topic id, as the tiering worker keeps it: a commit brings it up to date
        with what compaction committed meanwhile, never reading the whole log again."""
        tid = self.ids[topic]
        table = self._tables.get(tid)
        if table is None:
            uri = table_uri(self.config, topic)
            table = DeltaTopicTable(uri, self.config.storage_options(), topic=topic)
            table.ensure_created()
            self._tables[tid] = table
        return table

    def worker(self, **settings: Any) -> CompactionWorker:
        base = {"min_grace_ms": 0, "target_file_bytes": 1 << 20, "merge_min_files": 1000}
        return CompactionWorker(self.engine, self.config, "test", Settings(**{**base, **settings}))

    # -- reading it back --------------------------------------------------------------------

    def delta_rows(self, topic: str, partition: int = 0) -> list[Rec]:
        t = DeltaTable(table_uri(self.config, topic), storage_options=self.config.storage_options())
        table = t.to_pyarrow_table(filters=[("partition", "=", partition)])
        ts = pc.cast(table.column("timestamp"), pa.timestamp("ms", "UTC")).cast(pa.int64())
        table = table.set_column(table.schema.get_field_index("timestamp"), "timestamp", ts)
        return table.sort_by("offset").to_pylist()

    def manifest_rows(self, topic: str, partition: int = 0) -> list[Rec]:
        """Every committed file's rows, in manifest order (a cold reader's view)."""
        out: list[Rec] = []
        for f in self.manifest.files(TopicIdPartition(self.ids[topic], partition)):
            table = pq.read_table(pa.BufferReader(self.store.get(f.object_key)))
            rows = table.to_pylist()
            assert all(f.base_offset <= r["offset"] <= f.last_offset for r in rows)
            out.extend(rows)
        for r in out:
            r["timestamp"] = int(r["timestamp"].timestamp() * 1000)
        return out

    def delta_log_actions(self, topic: str) -> list[dict[str, Any]]:
        import json

        prefix = f"{self.config.key('topics', topic)}/_delta_log/"
        out = []
        for key, _ in sorted(self.store.list(prefix)):
            if key.endswith(".json"):
                out.extend(json.loads(line) for line in self.store.get(key).decode().splitlines())
        return out


def now_ms() -> int:
    return int(dt.datetime.now(dt.UTC).timestamp() * 1000)


def rec(i: int, ts: int, key: bytes | None = None, value: bytes | None = b"") -> Rec:
    return {
        "key": key if key is not None else f"k{i}".encode(),
        "value": value if value != b"" else f"v{i}".encode(),
        "headers": None,
        "ts": ts,
    }
