"""JSON Schema and Protobuf through the Schema Registry on a real broker, driven by clients no
one here wrote: confluent-kafka's SchemaRegistryClient with JSONSerializer/JSONDeserializer
and ProtobufSerializer/ProtobufDeserializer (the message type generated at test time by
protoc) producing over tierlog's Kafka listener and reading back; each compatibility level's
refusal (409) and acceptance for both types; `tierlog schemas` and `tierlog consume
--value-format`.

One broker (with its Kafka listener) serves the whole file; each test has its own topics and
subjects."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from grpc_tools import protoc
from starlette.testclient import TestClient

from console.app import create_app
from tests.integration.brokers import BrokerProcess
from tests.integration.kafka_clients import consume
from tests.integration.ports import free_port
from tierlog.cli.main import main


class Node:
    def __init__(self, broker: BrokerProcess, kafka: str) -> None:
        self.broker, self.kafka = broker, kafka
        self.url = broker.url
        self.registry = f"{broker.url}/schema-registry"


@pytest.fixture(scope="module")
def node(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Node]:
    port = free_port()
    root = tmp_path_factory.mktemp("registry-types")
    broker = BrokerProcess(
        db_factory(), root / "data-1", 1, ["--kafka-listen", f"127.0.0.1:{port}"]
    )
    try:
        yield Node(broker.start(), f"127.0.0.1:{port}")
    finally:
        broker.stop()


def registry(node: Node) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": node.registry})


def produce(node: Node, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": node.kafka, "linger.ms": 5})
    errors: list[Any] = []
    for value in values:
        p.produce(topic, value=value, on_delivery=lambda e, _m: errors.append(e) if e else None)
    assert p.flush(30) == 0 and errors == []


def tierlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tierlog", *args], capture_output=True, text=True, timeout=120
    )


def consume_decoded(node: Node, topic: str, fmt: str, count: int) -> list[Any]:
    result = tierlog(
        "consume", topic, "--from-beginning", "--max-messages", str(count), "--url", node.url,
        "--value-format", fmt,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


ORDER_JSON = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "item": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["id", "item"],
    }
)


def test_json_schema_serializer_round_trip_over_kafka(node: Node) -> None:
    topic = "json-orders"
    node.broker.create_topic(topic, 1)
    serialize = JSONSerializer(ORDER_JSON, registry(node))
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = [{"id": i, "item": f"item-{i}", "tags": ["a"] * (i % 3)} for i in range(10)]
    produce(node, topic, [serialize(order, ctx) for order in orders])
    deserialize = JSONDeserializer(ORDER_JSON, schema_registry_client=registry(node))
    got = [deserialize(m.value(), ctx) for m in consume(node.kafka, topic, 0, len(orders))]
    assert got == orders
    latest = registry(node).get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON"
    assert json.loads(latest.schema.schema_str) == json.loads(ORDER_JSON)
    assert consume_decoded(node, topic, "json-sr", len(orders)) == orders


ORDER_PROTO = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  string item = 2;
  map<string, int32> quantities = 3;
  google.protobuf.Timestamp placed = 4;
  repeated Line lines = 5;
  message Line { string sku = 1; }
}
"""


@pytest.fixture(scope="module")
def order_pb2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The Order message type, generated now by protoc from ORDER_PROTO."""
    out = tmp_path_factory.mktemp("generated")
    (out / "shop_order.proto").write_text(ORDER_PROTO)
    well_known = str(Path(protoc.__file__).parent / "_proto")
    args = ["protoc", f"-I{out}", f"-I{well_known}", f"--python_out={out}", "shop_order.proto"]
    assert protoc.main(args) == 0
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("shop_order_pb2")
    finally:
        sys.path.remove(str(out))


def test_protobuf_serializer_round_trip_over_kafka(node: Node, order_pb2: ModuleType) -> None:
    topic = "proto-orders"
    node.broker.create_topic(topic, 1)
    order_class = order_pb2.Order
    serialize = ProtobufSerializer(order_class, registry(node), {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = []
    for i in range(10):
        order = order_class(id=i, item=f"item-{i}", lines=[order_class.Line(sku=f"s{i}")])
        order.quantities["x"] = i
        order.placed.seconds = 1_700_000_000 + i
        orders.append(order)
    produce(node, topic, [serialize(order, ctx) for order in orders])
    records = consume(node.kafka, topic, 0, len(orders))
    deserialize = ProtobufDeserializer(order_class, {"use.deprecated.format": False})
    assert [deserialize(m.value(), ctx) for m in records] == orders
    # with a registry client it reads the writer's schema as a serialized descriptor too
    deserialize = ProtobufDeserializer(
        order_class, {"use.deprecated.format": False}, schema_registry_client=registry(node)
    )
    assert [deserialize(m.value(), ctx) for m in records] == orders
    # the registry holds it as .proto text (the serializer sent a base64 descriptor)
    latest = registry(node).get_latest_version(f"{topic}-value").schema
    assert latest.schema_type == "PROTOBUF" and "message Order {" in latest.schema_str
    decoded = consume_decoded(node, topic, "protobuf", len(orders))
    assert decoded[3] == {
        "id": "3",
        "item": "item-3",
        "quantities": {"x": 3},
        "placed": "2023-11-14T22:13:23Z",
        "lines": [{"sku": "s3"}],
    }


def _obj(**props: Any) -> str:
    return json.dumps({"type": "object", "properties": props})


S = '{"type": "string"}'
S_MAX5 = '{"type": "string", "maxLength": 5}'
S_MAX3 = '{"type": "string", "maxLength": 3}'
S_OR_I = '{"type": ["string", "integer"]}'
Q_INT, Q_STR = _obj(q={"type": "integer"}), _obj(q={"type": "string"})
Q_STR_TITLED = json.dumps({"type": "object", "title": "t", "properties": {"q": {"type": "string"}}})
Q_FALSE = _obj(q=False)
S_V2 = '{"type": "string", "title": "v2"}'

P1 = 'syntax = "proto3"; package shop; message Order { string id = 1; int32 qty = 2; }'
P_QTY64 = 'syntax = "proto3"; package shop; message Order { string id = 1; int64 qty = 2; }'
P_QTYSTR = 'syntax = "proto3"; package shop; message Order { string id = 1; string qty = 2; }'
P_NOTE = P1.replace("int32 qty = 2;", "int32 qty = 2; string note = 3;")
P_QTYSTR_NOTE = P_QTYSTR.replace("string qty = 2;", "string qty = 2; string note = 3;")
P_NOQTY = 'syntax = "proto3"; package shop; message Order { string id = 1; }'
P_PKG = P1.replace("package shop;", "package store;")

# type, level: (history, refused, accepted); the history is registered under NONE first.
# Under the transitive levels (but JSON's FULL_TRANSITIVE) the refused change is compatible
# with the latest version and not with the first: only a check against all refuses it.
LEVEL_CASES: dict[tuple[str, str], tuple[list[str], str | None, str]] = {
    ("JSON", "BACKWARD"): ([S_MAX5], S_MAX3, S),
    ("JSON", "FORWARD"): ([S], S_OR_I, S_MAX5),
    ("JSON", "FULL"): ([S], S_MAX5, '{"type": "string", "title": "t"}'),
    ("JSON", "BACKWARD_TRANSITIVE"): ([Q_INT, Q_STR], Q_STR_TITLED, '{"type": "object"}'),
    ("JSON", "FORWARD_TRANSITIVE"): ([Q_INT, Q_STR], Q_STR_TITLED, Q_FALSE),
    ("JSON", "FULL_TRANSITIVE"): ([S, S_V2], S_MAX5, '{"type": "string", "description": "d"}'),
    ("JSON", "NONE"): ([S], None, '{"type": "integer"}'),
    ("PROTOBUF", "BACKWARD"): ([P1], P_QTYSTR, P_NOTE),
    ("PROTOBUF", "FORWARD"): ([P1], P_PKG, P_QTY64),
    ("PROTOBUF", "FULL"): ([P1], P_QTYSTR, P_NOTE),
    ("PROTOBUF", "BACKWARD_TRANSITIVE"): ([P1, P_QTYSTR], P_QTYSTR_NOTE, P_NOQTY),
    ("PROTOBUF", "FORWARD_TRANSITIVE"): ([P1, P_QTYSTR], P_QTYSTR_NOTE, P_NOQTY),
    ("PROTOBUF", "FULL_TRANSITIVE"): ([P1, P_QTYSTR], P_QTYSTR_NOTE, P_NOQTY),
    ("PROTOBUF", "NONE"): ([P1], None, P_PKG),
}


@pytest.mark.parametrize(("kind", "level"), list(LEVEL_CASES), ids=lambda v: str(v))
def test_each_level_refuses_with_409_and_accepts_the_compatible(
    node: Node, kind: str, level: str
) -> None:
    history, refused, accepted = LEVEL_CASES[(kind, level)]
    sr = registry(node)
    subject = f"level-{kind.lower()}-{level.lower()}"
    sr.set_compatibility(subject, "NONE")  # the history need not follow the level itself
    for text in history:
        sr.register_schema(subject, Schema(text, kind))
    sr.set_compatibility(subject, level)
    if refused is not None:
        with pytest.raises(SchemaRegistryError) as caught:
            sr.register_schema(subject, Schema(refused, kind))
        assert caught.value.http_status_code == 409 and caught.value.error_code == 409
        if level.endswith("TRANSITIVE") and (kind, level) != ("JSON", "FULL_TRANSITIVE"):
            assert sr.test_compatibility(subject, Schema(refused, kind))
    sr.register_schema(subject, Schema(accepted, kind))
    assert sr.get_versions(subject) == list(range(1, len(history) + 2))


def cli(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`tierlog ARGS` in this process: (exit code, stdout, stderr)."""
    code = main(list(args))
    out, err = capfd.readouterr()
    return code, out, err


def test_cli_schemas_register_check_level_list_delete(
    node: Node, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    url = ("--url", node.url)
    order = tmp_path / "order.json"
    order.write_text(ORDER_JSON)
    code, out, _ = cli(capfd, "schemas", *url, "register", "cli-orders-value", str(order))
    assert code == 0 and isinstance(json.loads(out)["id"], int)
    assert cli(capfd, "schemas", *url, "versions", "cli-orders-value")[1].split() == [
        "[",
        "1",
        "]",
    ]
    shown = json.loads(cli(capfd, "schemas", *url, "get", "cli-orders-value")[1])
    assert (shown["version"], shown["schemaType"]) == (1, "JSON")
    # an open content model takes no new property: Confluent's rule, the registry's answer
    doc = json.loads(ORDER_JSON)
    doc["properties"]["note"] = {"type": "string"}
    wider = tmp_path / "wider.json"
    wider.write_text(json.dumps(doc))
    code, out, _ = cli(capfd, "schemas", *url, "check", "cli-orders-value", str(wider))
    assert code == 1 and out.startswith("incompatible")
    assert "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in out and "#/properties/note" in out
    doc["properties"].pop("note")
    doc["description"] = "orders"
    described = tmp_path / "described.json"
    described.write_text(json.dumps(doc))
    assert cli(capfd, "schemas", *url, "check", "cli-orders-value", str(described))[:2] == (
        0,
        "compatible\n",
    )
    assert cli(capfd, "schemas", *url, "level", "cli-orders-value")[1] == "BACKWARD\n"
    assert cli(capfd, "schemas", *url, "level", "cli-orders-value", "full")[1] == "FULL\n"
    assert cli(capfd, "schemas", *url, "level", "cli-orders-value")[1] == "FULL\n"
    proto = tmp_path / "order.proto"
    proto.write_text(P1)
    code, out, _ = cli(capfd, "schemas", *url, "register", "cli-proto-value", str(proto))
    proto_id = json.loads(out)["id"]
    assert (
        json.loads(cli(capfd, "schemas", *url, "get", "--id", str(proto_id))[1])["schemaType"]
        == "PROTOBUF"
    )
    listed = cli(capfd, "schemas", *url, "list", "--prefix", "cli-")[1].split()
    assert listed == ["cli-orders-value", "cli-proto-value"]
    bad = tmp_path / "bad.proto"
    bad.write_text('syntax = "proto3"; message A { int32 a = 1 }')
    code, _, err = cli(capfd, "schemas", *url, "register", "cli-bad-value", str(bad))
    assert code == 1 and "42201" in err and 'Expected ";"' in err
    assert cli(capfd, "schemas", *url, "delete", "cli-proto-value")[1].split() == ["[", "1", "]"]
    assert cli(capfd, "schemas", *url, "list", "--prefix", "cli-")[1].split() == [
        "cli-orders-value"
    ]
    assert "cli-proto-value" in cli(capfd, "schemas", *url, "list", "--deleted")[1].split()
    code, out, _ = cli(capfd, "schemas", *url, "delete", "cli-proto-value", "--permanent")
    assert code == 0
    code, _, err = cli(capfd, "schemas", *url, "get", "cli-proto-value")
    assert code == 1 and "40401" in err


def test_cli_consume_refuses_values_it_cannot_decode(
    node: Node, capfd: pytest.CaptureFixture[str]
) -> None:
    for topic, value, reason in [
        ("plain-values", b"plain text", "not Confluent's magic byte 0"),
        ("unknown-ids", b"\x00\x00\x0f\x42\x3f{}", "40403"),
    ]:
        node.broker.create_topic(topic, 1)
        produce(node, topic, [value])
        code, out, err = cli(
            capfd, "consume", topic, "--from-beginning", "--max-messages", "1",
            "--url", node.url, "--value-format", "json-sr",
        )  # fmt: skip
        assert code == 1 and out == "", err
        assert "partition 0 offset 0" in err and reason in err


def test_console_schemas_page_and_decoded_messages(node: Node, order_pb2: ModuleType) -> None:
    sr = registry(node)
    topic, subject = "console-orders", "console-orders-value"
    node.broker.create_topic(topic, 1)
    v1 = json.dumps({"type": "object", "properties": {"item": {"type": "string"}}})
    v2 = json.dumps(
        {"type": "object", "properties": {"item": {"type": "string"}, "qty": {"type": "integer"}}}
    )
    sr.set_compatibility(subject, "NONE")
    sr.register_schema(subject, Schema(v1, "JSON"))
    ctx = SerializationContext(topic, MessageField.VALUE)
    json_value = JSONSerializer(v2, sr)({"item": "pen", "qty": 2}, ctx)
    proto_value = ProtobufSerializer(order_pb2.Order, sr, {"use.deprecated.format": False})(
        order_pb2.Order(id=5, item="ink"), ctx
    )
    unknown = b"\x00\x00\x0f\x42\x3f{}"
    produce(node, topic, [json_value, proto_value, unknown])
    v2_id = sr.lookup_schema(subject, Schema(v2, "JSON")).schema_id
    with TestClient(create_app(node.url)) as console:
        listing = console.get("/schemas")
        assert listing.status_code == 200
        row = listing.text.split(f'data-subject="{subject}"')[1].split("</tr>")[0]
        assert '<td data-col="type">PROTOBUF</td>' in row  # the Protobuf value registered v3
        assert '<td data-col="level">NONE</td>' in row
        assert f'href="/messages?topic={topic}">{topic}</a>' in row
        page = console.get(f"/schemas/{subject}?left=1&right=2")
        assert page.status_code == 200
        inserted = [r.split("</tr>")[0] for r in page.text.split('<tr class="insert">')[1:]]
        assert any("&#34;qty&#34;: {" in r for r in inserted), inserted
        assert console.get(f"/schemas/{subject}?right=9").status_code == 400
        found = console.get(f"/schemas?id={v2_id}", follow_redirects=False)
        assert found.status_code == 303
        assert found.headers["location"] == f"/schemas/{subject}?right=2"
        messages = console.get(f"/messages?topic={topic}").text
        assert f'<a href="/schemas?id={v2_id}">schema {v2_id}</a> · JSON' in messages
        assert f"{subject} v2</a>" in messages and "&#34;item&#34;: &#34;pen&#34;" in messages
        assert "PROTOBUF shop.Order" in messages and "&#34;item&#34;: &#34;ink&#34;" in messages
        assert "schema 999999:" in messages  # a value naming an unknown id says so


def test_references_json_ref_and_proto_import_resolve_through_subjects(node: Node) -> None:
    from confluent_kafka.schema_registry import SchemaReference

    sr = registry(node)
    customer = json.dumps({"type": "object", "properties": {"name": {"type": "string"}}})
    sr.register_schema("ref-customer-json", Schema(customer, "JSON"))
    order = json.dumps({"type": "object", "properties": {"buyer": {"$ref": "customer.json"}}})
    refs = [SchemaReference("customer.json", "ref-customer-json", 1)]
    first = sr.register_schema("ref-order-json", Schema(order, "JSON", refs))
    assert sr.get_schema(first).references[0].name == "customer.json"
    # the referenced subject's next version changes a property's type: the order that points
    # at it is refused, since its buyer now holds another type
    narrowed = json.dumps({"type": "object", "properties": {"name": {"type": "integer"}}})
    sr.set_compatibility("ref-customer-json", "NONE")
    sr.register_schema("ref-customer-json", Schema(narrowed, "JSON"))
    moved = [SchemaReference("customer.json", "ref-customer-json", 2)]
    assert not sr.test_compatibility("ref-order-json", Schema(order, "JSON", moved))
    dangling = json.dumps({"type": "object", "properties": {"x": {"$ref": "nowhere.json"}}})
    with pytest.raises(SchemaRegistryError) as caught:
        sr.register_schema("ref-bad-json", Schema(dangling, "JSON"))
    assert caught.value.error_code == 42201 and "nowhere.json" in caught.value.error_message

    money = 'syntax = "proto3"; package shop.types; message Money { int64 cents = 1; }'
    sr.register_schema("ref-money-proto", Schema(money, "PROTOBUF"))
    priced = (
        'syntax = "proto3"; package shop; import "shop/money.proto";'
        " message Item { string sku = 1; shop.types.Money price = 2; }"
    )
    money_ref = [SchemaReference("shop/money.proto", "ref-money-proto", 1)]
    item_id = sr.register_schema("ref-item-proto", Schema(priced, "PROTOBUF", money_ref))
    assert "shop.types.Money price = 2;" in sr.get_schema(item_id).schema_str
    with pytest.raises(SchemaRegistryError) as caught:  # the import names no reference
        sr.register_schema("ref-item-bad-proto", Schema(priced, "PROTOBUF"))
    assert caught.value.error_code == 42201 and "shop/money.proto" in caught.value.error_message
