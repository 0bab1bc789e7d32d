"""The Schema Registry on real brokers, driven by clients no one here wrote: confluent-kafka's
SchemaRegistryClient with AvroSerializer / AvroDeserializer producing over tierlog's Kafka
listener; each compatibility level's refusal (409) and acceptance; the same answers from
every broker and after a restart; and broker-side validation refusing a record without a
registered id over HTTP and Kafka, writing nothing.

One two-broker cluster (one database) serves the whole file."""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from ingest.kafka.record_batch import encode_batch
from logformat.schema import CONSUMER_SCHEMA
from tests.integration.brokers import BrokerProcess
from tests.integration.kafka_clients import consume
from tests.integration.kafka_wire import call, produce_request, produce_response
from tests.integration.ports import free_port

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
    }
)


class Node:
    def __init__(self, broker: BrokerProcess, kafka: str) -> None:
        self.broker, self.kafka = broker, kafka
        self.registry = f"{broker.url}/schema-registry"


@pytest.fixture(scope="module")
def nodes(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Node]]:
    db = db_factory()
    root = tmp_path_factory.mktemp("registry-cluster")
    out: list[Node] = []
    try:
        for broker_id in (1, 2):
            port = free_port()
            args = ["--kafka-listen", f"127.0.0.1:{port}"]
            b = BrokerProcess(db, root / f"data-{broker_id}", broker_id, args)
            out.append(Node(b.start(), f"127.0.0.1:{port}"))
        yield out
    finally:
        for n in out:
            n.broker.stop()


def client(node: Node) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": node.registry})


def test_avro_serializer_round_trip_over_kafka(nodes: list[Node]) -> None:
    writer, reader = nodes
    topic = "orders-rt"
    # validation on: the serializer's registered id is what the broker checks
    writer.broker.create_topic(topic, 1, confluent_value_schema_validation="true")
    serialize = AvroSerializer(client(writer), ORDER)
    orders = [{"id": i, "item": f"item-{i}"} for i in range(20)]
    p = Producer({"bootstrap.servers": writer.kafka, "linger.ms": 5})
    errors: list[Any] = []
    for order in orders:
        value = serialize(order, SerializationContext(topic, MessageField.VALUE))
        p.produce(topic, value=value, on_delivery=lambda e, _m: errors.append(e) if e else None)
    assert p.flush(30) == 0 and errors == []
    # read back through the other broker's registry (a consumer that never saw the schema)
    deserialize = AvroDeserializer(client(reader))
    got = [
        deserialize(m.value(), SerializationContext(topic, MessageField.VALUE))
        for m in consume(reader.kafka, topic, 0, len(orders))
    ]
    assert got == orders
    latest = client(reader).get_latest_version(f"{topic}-value").schema.schema_str
    assert json.loads(latest) == json.loads(ORDER)


def _rec(*fields: tuple[str, str, Any]) -> str:
    out = []
    for name, type_, default in fields:
        f: dict[str, Any] = {"name": name, "type": type_}
        if default is not None:
            f["default"] = default
        out.append(f)
    return json.dumps({"type": "record", "name": "r", "fields": out})


S1 = _rec(("f1", "string", None))
S2 = _rec(("f1", "string", None), ("f2", "string", "foo"))
S3 = _rec(("f1", "string", None), ("f2", "string", None))
S8 = _rec(("f1", "string", None), ("f2", "string", "foo"), ("f3", "string", "bar"))

# level: (history registered in order, a refused change, an accepted change), the schemas of
# Confluent's AvroCompatibilityTest
LEVEL_CASES = {
    "BACKWARD": ([S1], S3, S2),
    "BACKWARD_TRANSITIVE": ([S1, S2], S3, S8),
    "FORWARD": ([S3], S1, S8),
    "FORWARD_TRANSITIVE": ([S3, S2], S1, S8),
    "FULL": ([S1], S3, S2),
    "FULL_TRANSITIVE": ([S1, S2], S3, S8),
    "NONE": ([S1], None, '"int"'),
}


@pytest.mark.parametrize("level", list(LEVEL_CASES))
def test_each_level_refuses_with_409_and_accepts_the_compatible(
    nodes: list[Node], level: str
) -> None:
    history, refused, accepted = LEVEL_CASES[level]
    sr = client(nodes[0])
    subject = f"level-{level.lower()}"
    sr.set_compatibility(subject, level)
    for text in history:
        sr.register_schema(subject, Schema(text, "AVRO"))
    if refused is not None:
        with pytest.raises(SchemaRegistryError) as caught:
            sr.register_schema(subject, Schema(refused, "AVRO"))
        assert caught.value.http_status_code == 409 and caught.value.error_code == 409
        assert not sr.test_compatibility_all_versions(subject, Schema(refused, "AVRO"))
    sr.register_schema(subject, Schema(accepted, "AVRO"))
    versions = sr.get_versions(subject)
    assert versions == list(range(1, len(history) + 2))


def _answers(node: Node, sid: int) -> list[Any]:
    paths = [
        "/subjects",
        "/subjects/same-value/versions",
        "/subjects/same-value/versions/latest",
        f"/schemas/ids/{sid}",
        f"/schemas/ids/{sid}/versions",
        "/config",
        "/config/same-value",
        "/mode",
    ]
    return [(p, node.broker.http.get(f"/schema-registry{p}").json()) for p in paths]


def test_every_broker_answers_alike_and_after_a_restart(nodes: list[Node]) -> None:
    first, second = nodes
    sr = client(first)
    sid = sr.register_schema("same-value", Schema(S1, "AVRO"))
    sr.register_schema("same-value", Schema(S2, "AVRO"))
    sr.set_compatibility("same-value", "FULL")
    before = _answers(first, sid)
    assert before == _answers(second, sid)
    first.broker.restart()
    assert _answers(first, sid) == before == _answers(second, sid)
    # registering through the other broker continues the same history (the id is global
    # per schema text: another test of this module may have registered S8 already)
    new_id = client(second).register_schema("same-value", Schema(S8, "AVRO"))
    latest = _answers(first, sid)[2]
    assert latest == _answers(second, sid)[2]
    assert (latest[1]["version"], latest[1]["id"]) == (3, new_id), latest


def _framed(schema_id: int, payload: bytes = b"\x02") -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def _produce_v8(bootstrap: str, topic: str, values: list[bytes]) -> Any:
    rows = [
        {"offset": i, "timestamp": 1, "key": None, "value": v, "headers": None}
        for i, v in enumerate(values)
    ]
    records = encode_batch(pa.RecordBatch.from_pylist(rows, schema=CONSUMER_SCHEMA), 0, len(rows))
    frame = call(bootstrap, produce_request(topic, records, version=8))
    return produce_response(frame, version=8).responses[0].partition_responses[0]


def _end_offset(node: Node, topic: str) -> int:
    return int(node.broker.http.get(f"/topics/{topic}").json()["partitions"][0]["log_end_offset"])


def test_validation_refuses_unregistered_ids_over_http_and_kafka(nodes: list[Node]) -> None:
    node = nodes[1]
    topic = "validated"
    node.broker.create_topic(topic, 1, confluent_value_schema_validation="true")
    good = client(node).register_schema(f"{topic}-value", Schema(S1, "AVRO"))
    elsewhere = client(node).register_schema("unrelated-value", Schema('"string"', "AVRO"))

    def b64(value: bytes) -> dict[str, str]:
        return {"value_b64": base64.b64encode(value).decode()}

    assert node.broker.produce(topic, [b64(_framed(good))]) == [{"partition": 0, "offset": 0}]
    for bad, why in [
        (_framed(987_654), "not registered"),
        (_framed(elsewhere), "not registered under subject 'validated-value'"),
        (b"plain text", "magic byte"),
        (b"\x00\x00", "magic byte"),
    ]:
        r = node.broker.http.post(
            f"/topics/{topic}/records",
            json={"records": [b64(_framed(good)), b64(bad), b64(_framed(good))]},
        )
        assert r.status_code == 422, r.text
        body = r.json()
        assert body["error_code"] == "INVALID_RECORD" and body["index"] == 1, body
        assert why in body["message"]
    assert _end_offset(node, topic) == 1  # nothing of the refused batches

    errors: list[Any] = []
    p = Producer({"bootstrap.servers": node.kafka, "linger.ms": 500, "retries": 0})
    # The partition's leader known first: records queued before it is known may outwait the
    # linger and leave in batches of their own (one passed while the whole batch must fail).
    p.list_topics(topic, timeout=30)
    for value in (_framed(good), _framed(987_654), _framed(good)):
        p.produce(topic, value=value, on_delivery=lambda e, _m: errors.append(e))
    assert p.flush(30) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_RECORD] * 3
    # librdkafka does not show the message: Produce v8 carries it, and the record's index
    leader = int(node.broker.http.get(f"/topics/{topic}").json()["partitions"][0]["leader"])
    answer = _produce_v8(nodes[leader - 1].kafka, topic, [_framed(good), _framed(987_654)])
    assert answer.error_code == KafkaError.INVALID_RECORD
    assert "record 1" in answer.error_message and "987654" in answer.error_message
    assert [
        (e.batch_index, "987654" in e.batch_index_error_message) for e in answer.record_errors
    ] == [(1, True)]
    assert _end_offset(node, topic) == 1
    # a batch of registered ids goes through the same path
    p.produce(topic, value=_framed(good))
    assert p.flush(30) == 0 and _end_offset(node, topic) == 2
    # a topic without validation takes anything
    node.broker.create_topic("unvalidated", 1)
    assert node.broker.produce("unvalidated", [{"value": "no schema"}])[0]["offset"] == 0


def test_the_documented_example_runs_as_written(nodes: list[Node]) -> None:
    page = (Path(__file__).parents[2] / "docs" / "schema-registry.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    env = {
        **os.environ,
        "TIERLOG_SCHEMA_REGISTRY_URL": nodes[0].registry,
        "TIERLOG_KAFKA_BOOTSTRAP": nodes[1].kafka,
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    printed = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert printed == [str({"id": i, "item": f"book-{i}"}) for i in range(3)]
