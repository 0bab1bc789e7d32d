"""Bad input gets the right status and Kafka error name, never a 500 or a partial write."""

from __future__ import annotations

import pytest

from tests.integration.brokers import BrokerProcess

ARROW = "application/vnd.apache.arrow.stream"


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics (but see create errors)."""
    return module_broker


def _expect(r: object, status: int, code: str) -> None:
    import httpx

    assert isinstance(r, httpx.Response)
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error_code"] == code, body
    assert isinstance(body["message"], str) and body["message"]


@pytest.mark.parametrize(
    "name", ["", ".", "..", "has space", "slash/name", "x" * 250, "ünï", "a|b"]
)
def test_invalid_topic_names(broker: BrokerProcess, name: str) -> None:
    _expect(broker.http.post("/topics", json={"name": name}), 400, "INVALID_TOPIC_EXCEPTION")


def test_topic_create_errors(broker_factory: object) -> None:
    assert callable(broker_factory)
    broker: BrokerProcess = broker_factory()  # its own broker: it lists every topic
    http = broker.http
    broker.create_topic("dup")
    _expect(http.post("/topics", json={"name": "dup"}), 409, "TOPIC_ALREADY_EXISTS")
    _expect(http.post("/topics", json={"name": "p0", "partitions": 0}), 400, "INVALID_PARTITIONS")
    _expect(http.post("/topics", json={"name": "p1", "partitions": "3"}), 400, "INVALID_PARTITIONS")
    _expect(
        http.post("/topics", json={"name": "rf", "replication_factor": 3}),
        400,
        "INVALID_REPLICATION_FACTOR",
    )
    _expect(
        http.post("/topics", json={"name": "c1", "configs": {"no.such": "1"}}),
        400,
        "INVALID_CONFIG",
    )
    _expect(
        http.post("/topics", json={"name": "c2", "configs": {"retention.ms": "soon"}}),
        400,
        "INVALID_CONFIG",
    )
    _expect(http.post("/topics", json={"name": "c3", "configs": []}), 400, "INVALID_CONFIG")
    _expect(
        http.post("/topics", content=b"{nope", headers={"content-type": "application/json"}),
        400,
        "INVALID_REQUEST",
    )
    _expect(http.post("/topics", json=["name"]), 400, "INVALID_REQUEST")
    names = [t["name"] for t in http.get("/topics").json()["topics"]]
    assert names == ["dup"]


def test_unknown_topic_and_partition(broker: BrokerProcess) -> None:
    http = broker.http
    broker.create_topic("known", partitions=2)
    _expect(http.get("/topics/nope"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    _expect(
        http.post("/topics/nope/records", json={"records": [{"value": 1}]}),
        404,
        "UNKNOWN_TOPIC_OR_PARTITION",
    )
    _expect(http.get("/topics/known/partitions/2/records"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    _expect(http.get("/topics/known/partitions/x/records"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    _expect(
        http.post("/topics/known/records", json={"records": [{"value": 1, "partition": 5}]}),
        404,
        "UNKNOWN_TOPIC_OR_PARTITION",
    )
    _expect(http.delete("/topics/nope"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    _expect(http.get("/no/such/path"), 404, "NOT_FOUND")
    _expect(http.put("/topics"), 405, "METHOD_NOT_ALLOWED")


def test_bad_records_reject_the_whole_request(broker: BrokerProcess) -> None:
    http = broker.http
    broker.create_topic("strict", partitions=2)
    bad_bodies = [
        {"records": [{"value": "ok"}, {"value_b64": "***not base64***"}]},
        {"records": [{"value": "ok"}, {"key": "a", "key_b64": "YQ=="}]},
        {"records": [{"value": "ok"}, {"partition": "0"}]},
        {"records": [{"value": "ok"}, {"timestamp": -5}]},
        {"records": [{"value": "ok"}, {"timestamp": "noon"}]},
        {"records": [{"value": "ok"}, {"headers": {"h": 5}}]},
        {"records": [{"value": "ok"}, "not an object"]},
    ]
    for body in bad_bodies:
        r = http.post("/topics/strict/records", json=body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error_code"] == "INVALID_RECORD", body
    for body in ({"records": []}, {"records": "x"}, {"recs": []}, [1, 2]):
        _expect(http.post("/topics/strict/records", json=body), 400, "INVALID_REQUEST")
    _expect(
        http.post(
            "/topics/strict/records",
            content=b'{"records": [',
            headers={"content-type": "application/json"},
        ),
        400,
        "INVALID_REQUEST",
    )
    _expect(
        http.post("/topics/strict/records", json={"records": [{"value": 1}]}, params={"acks": "2"}),
        400,
        "INVALID_REQUEST",
    )
    _expect(
        http.post("/topics/strict/records", content=b"x", headers={"content-type": "image/png"}),
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    )
    # Good records to partition 0 and a bad partition in one request: nothing is written.
    _expect(
        http.post(
            "/topics/strict/records",
            json={"records": [{"value": "ok", "partition": 0}, {"value": 1, "partition": 9}]},
        ),
        404,
        "UNKNOWN_TOPIC_OR_PARTITION",
    )
    for p in (0, 1):
        assert broker.fetch("strict", p)["high_watermark"] == 0


def test_invalid_arrow(broker: BrokerProcess) -> None:
    import pyarrow as pa

    broker.create_topic("arrowbad")
    http = broker.http
    _expect(
        http.post(
            "/topics/arrowbad/records",
            content=b"definitely not arrow",
            headers={"content-type": ARROW},
        ),
        400,
        "INVALID_RECORD",
    )
    sink = pa.BufferOutputStream()
    table = pa.table({"value": [b"x"], "surprise": [1]})
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    _expect(
        http.post(
            "/topics/arrowbad/records",
            content=sink.getvalue().to_pybytes(),
            headers={"content-type": ARROW},
        ),
        400,
        "INVALID_RECORD",
    )
    sink = pa.BufferOutputStream()
    table = pa.table({"value": pa.array([1.5])})
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    _expect(
        http.post(
            "/topics/arrowbad/records",
            content=sink.getvalue().to_pybytes(),
            headers={"content-type": ARROW},
        ),
        400,
        "INVALID_RECORD",
    )
    assert broker.fetch("arrowbad")["high_watermark"] == 0


def test_record_over_max_message_bytes(broker: BrokerProcess) -> None:
    broker.create_topic("small", max_message_bytes=2000)
    _expect(
        broker.http.post(
            "/topics/small/records", json={"records": [{"value": "ok"}, {"value": "x" * 5000}]}
        ),
        413,
        "MESSAGE_TOO_LARGE",
    )
    assert broker.fetch("small")["high_watermark"] == 0
    # Many small records that together exceed the limit are split into several frames.
    offsets = broker.produce("small", [{"value": "y" * 100} for _ in range(100)])
    assert [o["offset"] for o in offsets] == list(range(100))


def test_body_over_request_limit(broker_factory: object) -> None:
    assert callable(broker_factory)
    b: BrokerProcess = broker_factory(extra_args=["--max-request-bytes", "10000"])
    b.create_topic("limited")
    _expect(
        b.http.post(
            "/topics/limited/records", json={"records": [{"value": "z" * 1000} for _ in range(20)]}
        ),
        413,
        "RECORD_LIST_TOO_LARGE",
    )
    assert b.fetch("limited")["high_watermark"] == 0


def test_fetch_errors(broker: BrokerProcess) -> None:
    broker.create_topic("reads")
    broker.produce("reads", [{"value": i} for i in range(10)])
    http = broker.http
    _expect(
        http.get("/topics/reads/partitions/0/records", params={"offset": 11}),
        416,
        "OFFSET_OUT_OF_RANGE",
    )
    r = http.get("/topics/reads/partitions/0/records", params={"offset": 11})
    assert r.json()["log_start_offset"] == 0 and r.json()["log_end_offset"] == 10
    for params in (
        {"offset": -1},
        {"offset": "x"},
        {"max_records": 0},
        {"wait_ms": 99999999},
        {"value_format": "hex"},
        {"max_bytes": "lots"},
    ):
        _expect(
            http.get("/topics/reads/partitions/0/records", params=params), 400, "INVALID_REQUEST"
        )
    _expect(
        http.get("/topics/reads/partitions/0/offsets", params={"at": "yesterday"}),
        400,
        "INVALID_REQUEST",
    )
    assert broker.fetch("reads", offset=10)["records"] == []


def test_alter_and_partition_errors(broker: BrokerProcess) -> None:
    broker.create_topic("alter", partitions=2)
    http = broker.http
    _expect(
        http.patch("/topics/alter/configs", json={"configs": {"cleanup.policy": "shred"}}),
        400,
        "INVALID_CONFIG",
    )
    _expect(
        http.post("/topics/alter/partitions", json={"partitions": 1}), 400, "INVALID_PARTITIONS"
    )
    _expect(
        http.post("/topics/alter/partitions", json={"partitions": "many"}),
        400,
        "INVALID_PARTITIONS",
    )
    _expect(
        http.patch("/topics/ghost/configs", json={"configs": {}}), 404, "UNKNOWN_TOPIC_OR_PARTITION"
    )
