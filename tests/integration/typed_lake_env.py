"""The typed lake tests' world (tests/integration/test_typed_lake.py): a broker with its
Kafka listener and Schema Registry, moto's S3, a tiering worker in this process, and how the
tests produce with confluent-kafka, tier and read the topic's Delta table back."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from deltalake import DeltaTable

from coldstore.layout import table_uri
from coldstore.object_store import ObjectStoreConfig
from metadata.db import make_engine
from tests.integration.brokers import BrokerProcess
from tests.integration.fetch_nodes import s3_env
from tests.integration.ports import free_port
from tests.integration.s3 import MotoServer, new_bucket
from tiering.worker import TieringWorker

TIER_POLL_S = 0.2  # between tiering passes; the broker's segment.ms is 1 s
TIER_TIMEOUT_S = 60


class Env:
    def __init__(self, broker: BrokerProcess, kafka: str, s3: ObjectStoreConfig) -> None:
        self.broker, self.kafka, self.s3 = broker, kafka, s3
        self.registry = SchemaRegistryClient({"url": f"{broker.url}/schema-registry"})
        self.engine = make_engine(broker.database_url, pool_size=2)
        self.worker = TieringWorker(self.engine, s3, "typed-lake-worker")
        self.avro_offsets: list[int] = []
        self.typed_offsets: dict[str, list[int]] = {}  # JSON Schema's and Protobuf's topics
        self.spark_rows: dict[int, Any] = {}  # the batch read's (typed, error) by offset

    def topic(self, name: str, mode: str = "value_schema_id_prefix", **configs: Any) -> None:
        self.broker.create_topic(name, segment_bytes=1024, lake_mode=mode, **configs)

    def produce(
        self, topic: str, values: list[bytes | None], keys: list[bytes] | None = None
    ) -> list[int]:
        """Each value in its own produce and flush (frames, hence segments, stay small);
        returns their offsets. Keys are k0, k1, ... unless given."""
        p = Producer({"bootstrap.servers": self.kafka, "linger.ms": 0})
        errors: list[Any] = []
        offsets: list[int] = []
        for i, value in enumerate(values):
            key = keys[i] if keys else b"k%d" % i
            p.produce(topic, key=key, value=value, on_delivery=_report(errors, offsets))
            assert p.flush(30) == 0
        assert errors == []
        return offsets

    def tier(self, topic: str, offsets: list[int]) -> list[dict[str, Any]]:
        """Tier until the table holds the records at `offsets` (a tombstone rolls the last
        segment once it is segment.ms old); their rows, in that order. Each pass reads only
        the table's offsets, and waits a little: segment.ms passes in a few."""
        uri, options = table_uri(self.s3, topic), self.s3.storage_options()
        deadline = time.monotonic() + TIER_TIMEOUT_S
        while time.monotonic() < deadline:
            self.worker.run_once()
            try:
                table = DeltaTable(uri, storage_options=options)
            except Exception:  # not created yet
                table = None
            if table is not None:
                tiered = set(table.to_pyarrow_table(columns=["offset"]).column(0).to_pylist())
                if tiered.issuperset(offsets):
                    rows = {r["offset"]: r for r in table.to_pyarrow_table().to_pylist()}
                    return [rows[o] for o in offsets]
            self.produce(topic, [None])
            time.sleep(TIER_POLL_S)
        raise AssertionError(f"{topic}: {offsets} were not tiered in {TIER_TIMEOUT_S} s")

    def schema(self, topic: str) -> pa.Schema:
        uri, options = table_uri(self.s3, topic), self.s3.storage_options()
        return pa.schema(DeltaTable(uri, storage_options=options).schema().to_arrow())


def _report(errors: list[Any], offsets: list[int]) -> Callable[[Any, Any], None]:
    def report(error: Any, message: Any) -> None:
        if error:
            errors.append(error)
        else:
            offsets.append(message.offset())

    return report


@pytest.fixture(scope="module", name="env")
def env_fixture(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory, moto_s3: MotoServer
) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("typed-lake")
    port = free_port()
    args = ["--kafka-listen", f"127.0.0.1:{port}", "--topic-default", "segment.ms=1000"]
    bucket = new_bucket(moto_s3)  # the broker's too: it serves GET /topics/{topic}/lake
    broker = BrokerProcess(db_factory(), root / "data", 1, args, env=s3_env(bucket))
    broker.start()
    e = Env(broker, f"127.0.0.1:{port}", bucket)
    try:
        yield e
    finally:
        e.worker.close()
        e.engine.dispose()
        broker.stop()
