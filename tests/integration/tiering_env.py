"""The tiering worker tests' world: stand-in replicas serving segment files at the contract's
internal path, a real Postgres and moto's HTTP S3 server, and the records they tier."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from sqlalchemy.engine import Engine

from coldstore.layout import table_uri
from coldstore.object_store import ObjectStoreConfig
from logformat.frame import encode_frame
from logformat.records import build_batch
from metadata.brokers import BrokerRepo
from metadata.cold_manifest import ColdManifest
from metadata.partition_state import PartitionStateRepo
from metadata.segment_registry import SegmentRegistry
from metadata.topics import TopicRepo
from metadata.types import TopicIdPartition
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tiering.worker import TieringWorker

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000
BIG = bytes(range(256)) * 4096  # a 1 MiB value with every byte value


class Replica:
    """A broker's segment endpoint: GET /internal/topics/{t}/partitions/{p}/segments/{base}."""

    def __init__(self, secret: str) -> None:
        self.segments: dict[tuple[str, int, int], tuple[bytes, int]] = {}
        self.requests: list[str] = []
        self.fail = False
        replica = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                replica.requests.append(url.path)
                parts = url.path.strip("/").split("/")
                end = parse_qs(url.query).get("end_offset")
                seg = replica.segments.get((parts[2], int(parts[4]), int(parts[6])))
                if replica.fail:
                    status, body = 500, b'{"error": "boom"}'
                elif self.headers.get("x-tierlog-cluster-token") != secret:
                    status, body = 403, b"{}"
                elif seg is None or (end and int(end[0]) != seg[1]):
                    status, body = 404, b'{"error": "NOT_FOUND"}'
                else:
                    status, body = 200, seg[0]
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Env:
    def __init__(self, engine: Engine, config: ObjectStoreConfig) -> None:
        self.engine, self.config = engine, config
        secret = PartitionStateRepo(engine).cluster_secret()
        self.replicas = {i: Replica(secret) for i in (1, 2)}
        for i, r in self.replicas.items():
            BrokerRepo(engine).register(i, r.url, 600_000)
        self.registry = SegmentRegistry(engine, backoff_ms=100, max_backoff_ms=200)
        self.manifest = ColdManifest(engine)
        self.expected: dict[tuple[int, int], dict[str, Any]] = {}

    def topic(self, name: str, partitions: int) -> str:
        return TopicRepo(self.engine).create(name, partitions, 2).id

    def add_segment(
        self, topic: str, partition: int, base: int, recs: list[dict[str, Any]], per_frame: int = 3
    ) -> int:
        """Serve a sealed segment on both replicas and register it; returns its end offset."""
        frames, offset = [], base
        for i in range(0, len(recs), per_frame):
            chunk = recs[i : i + per_frame]
            batch = build_batch(
                [r["key"] for r in chunk],
                [r["value"] for r in chunk],
                [r["headers"] for r in chunk],
                [r["ts"] for r in chunk],
                T0,
            )
            frames.append(bytes(encode_frame(batch, base_offset=offset, compression="zstd")))
            for r in chunk:
                self.expected[(partition, offset)] = r
                offset += 1
        data = b"".join(frames)
        for r in self.replicas.values():
            r.segments[(topic, partition, base)] = (data, offset)
        tid = TopicRepo(self.engine).get(topic)
        assert tid is not None
        self.registry.register_sealed(TopicIdPartition(tid.id, partition), base, offset, len(data))
        return offset

    def worker(self, name: str, **kw: Any) -> TieringWorker:
        return TieringWorker(self.engine, self.config, name, **kw)

    def delta_rows(self, topic: str) -> list[dict[str, Any]]:
        t = DeltaTable(table_uri(self.config, topic), storage_options=self.config.storage_options())
        table = t.to_pyarrow_table()
        # delta-rs reads timestamps as microseconds; the files hold milliseconds
        table = table.set_column(
            table.schema.get_field_index("timestamp"),
            "timestamp",
            pc.cast(table.column("timestamp"), pa.timestamp("ms", "UTC")),
        )
        return table.sort_by([("partition", "ascending"), ("offset", "ascending")]).to_pylist()

    def assert_exact(self, topic: str) -> None:
        rows = self.delta_rows(topic)
        keys = [(r["partition"], r["offset"]) for r in rows]
        assert len(keys) == len(set(keys)), "an offset was tiered twice"
        assert sorted(keys) == sorted(self.expected)
        for r in rows:
            want = self.expected[(r["partition"], r["offset"])]
            assert r["key"] == want["key"]
            assert r["value"] == want["value"]
            assert r["headers"] == want["headers"]
            assert r["timestamp"] == dt.datetime.fromtimestamp(want["ts"] / 1000, dt.UTC)


@pytest.fixture(name="env")
def env_fixture(db_engine: Engine, s3_bucket: ObjectStoreConfig) -> Iterator[Env]:
    e = Env(db_engine, s3_bucket)
    yield e
    for r in e.replicas.values():
        r.server.shutdown()


def rec(i: int, **kw: Any) -> dict[str, Any]:
    r = {"key": f"k{i}".encode(), "value": f"v{i}".encode(), "headers": None, "ts": T0 + i}
    r.update(kw)
    return r


def tricky() -> list[dict[str, Any]]:
    return [
        rec(0, key=b"\x00\xff\x80binary", value=bytes(range(256))),
        rec(1, key=None, value=b"no key"),
        rec(2, value=None),  # a tombstone
        rec(3, headers=[{"key": "h1", "value": b"\x00\x01"}, {"key": "ünï", "value": b""}]),
        rec(4, key="ключ 🔑".encode(), value="värde ✓ 日本".encode()),
        rec(5, value=BIG),
        rec(6, key=b"", value=b"", headers=[]),
        rec(7, ts=T0 - 5000),  # timestamps need not be ordered
    ]
