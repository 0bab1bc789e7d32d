"""The broker's schema-id check (ingest/service/schema_ids.py) over a real registry store:
each subject name strategy, keys, the cache's refresh after a registration, and the index
a refusal names. In process: the produce paths that call it run in
test_schema_registry.py."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from ingest.service.schema_ids import SchemaIdCheck, SchemaValidationError
from metadata.configs import topic_config
from metadata.db import make_engine
from metadata.registry_store import RegistryStore
from registry.bodies import SchemaRequest
from registry.service import Registry
from schemaformat.kinds import kinds


def avro(name: str, namespace: str = "shop") -> str:
    fields = [{"name": "a", "type": "int"}]
    return json.dumps({"type": "record", "name": name, "namespace": namespace, "fields": fields})


@pytest.fixture(scope="module")
def store(db_factory: Callable[..., str]) -> Iterator[RegistryStore]:
    engine = make_engine(db_factory())
    yield RegistryStore(engine)
    engine.dispose()


def register(store: RegistryStore, subject: str, schema: str) -> int:
    req = SchemaRequest(schema, "AVRO", (), None, None)
    return Registry(store, kinds()).register(subject, req, normalize=False).schema_id


def framed(schema_id: int) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + b"\x02"


def batch(values: list[bytes | None], keys: list[bytes | None] | None = None) -> pa.RecordBatch:
    keys = keys if keys is not None else [None] * len(values)
    return pa.record_batch(
        {"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())}
    )


def check(ids: SchemaIdCheck, topic: str, configs: dict[str, Any], b: pa.RecordBatch) -> None:
    asyncio.run(ids.check_batch(topic, topic_config(configs), b))


def refused_index(
    ids: SchemaIdCheck, topic: str, configs: dict[str, Any], b: pa.RecordBatch
) -> int:
    with pytest.raises(SchemaValidationError) as caught:
        check(ids, topic, configs, b)
    assert caught.value.http_status == 422 and caught.value.code.value == "INVALID_RECORD"
    return caught.value.index


VALUE_ON = {"confluent.value.schema.validation": "true"}


def test_topic_name_strategy(store: RegistryStore) -> None:
    ids = SchemaIdCheck(store)
    good = register(store, "t1-value", avro("A"))
    other = register(store, "elsewhere-value", avro("B"))
    check(ids, "t1", VALUE_ON, batch([framed(good), None, framed(good)]))  # tombstones pass
    assert refused_index(ids, "t1", VALUE_ON, batch([framed(good), framed(other)])) == 1
    assert refused_index(ids, "t1", VALUE_ON, batch([framed(good), b"raw"])) == 1
    check(ids, "t1", {}, batch([b"raw"]))  # validation off


def test_a_registration_after_a_refusal_is_seen(store: RegistryStore) -> None:
    clock = [0.0]
    ids = SchemaIdCheck(store, clock=lambda: clock[0])
    sid = register(store, "first-value", avro("Late"))
    assert refused_index(ids, "late", VALUE_ON, batch([framed(sid)])) == 0
    register(store, "late-value", avro("Late"))
    clock[0] += 1.1  # past the interval an id found wanting is not asked about again
    check(ids, "late", VALUE_ON, batch([framed(sid)]))


def test_record_name_strategies(store: RegistryStore) -> None:
    ids = SchemaIdCheck(store)
    by_name = register(store, "shop.Order", avro("Order"))
    by_topic_and_name = register(store, "t2-shop.Invoice", avro("Invoice"))
    record = {**VALUE_ON, "confluent.value.subject.name.strategy": "RecordNameStrategy"}
    check(ids, "t2", record, batch([framed(by_name)]))
    assert (
        refused_index(ids, "t2", record, batch([framed(by_name), framed(by_topic_and_name)])) == 1
    )
    topic_record = {**VALUE_ON, "confluent.value.subject.name.strategy": "TopicRecordNameStrategy"}
    check(ids, "t2", topic_record, batch([framed(by_topic_and_name)]))
    assert refused_index(ids, "t2", topic_record, batch([framed(by_name)])) == 0


def test_keys(store: RegistryStore) -> None:
    ids = SchemaIdCheck(store)
    key_id = register(store, "t3-key", avro("Key"))
    keys_on = {"confluent.key.schema.validation": "true"}
    check(ids, "t3", keys_on, batch([b"any value"], [framed(key_id)]))
    assert refused_index(ids, "t3", keys_on, batch([b"v", b"v"], [framed(key_id), b"k"])) == 1
