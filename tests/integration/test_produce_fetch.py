"""Produce and fetch through a real broker: ordering, partitioning, formats, long-poll."""

from __future__ import annotations

import base64
import threading
import time

import pyarrow as pa
import pytest

from logformat.partitioner import partition_for_key
from tests.integration.brokers import BrokerProcess

ARROW = "application/vnd.apache.arrow.stream"


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics."""
    return module_broker


def test_offsets_are_dense_and_ordered_per_partition(broker: BrokerProcess) -> None:
    broker.create_topic("orders", partitions=3)
    for round_ in range(5):
        offsets = broker.produce(
            "orders", [{"value": f"v{round_}-{i}", "partition": i % 3} for i in range(30)]
        )
        assert [o["partition"] for o in offsets] == [i % 3 for i in range(30)]
    for p in range(3):
        rows = broker.fetch_all("orders", p)
        assert [r["offset"] for r in rows] == list(range(50))
        assert [r["value"] for r in rows] == [
            f"v{k}-{i}" for k in range(5) for i in range(30) if i % 3 == p
        ]


def test_same_key_same_partition_as_kafka(broker: BrokerProcess) -> None:
    broker.create_topic("keyed", partitions=6)
    keys = [f"user-{i}" for i in range(40)]
    first = broker.produce("keyed", [{"key": k, "value": "a"} for k in keys])
    second = broker.produce("keyed", [{"key": k, "value": "b"} for k in keys])
    for k, a, b in zip(keys, first, second, strict=True):
        assert a["partition"] == b["partition"] == partition_for_key(k.encode(), 6)


def test_null_keys_spread_over_partitions(broker: BrokerProcess) -> None:
    broker.create_topic("spread", partitions=4)
    seen = {broker.produce("spread", [{"value": "x"}] * 5)[0]["partition"] for _ in range(40)}
    assert len(seen) > 1


def test_json_values_come_back_equal(broker: BrokerProcess) -> None:
    broker.create_topic("json")
    values = ["plain text", "ünïcødé ✓", {"a": 1, "b": [1, 2, {"c": None}]}, [1, "two", 3.5], ""]
    broker.produce(
        "json",
        [{"key": "k", "value": v, "headers": {"h": "1"}} for v in values] + [{"key": "gone"}],
    )
    rows = broker.fetch_all("json")
    assert [r["value"] for r in rows] == [*values, None]
    assert rows[0]["key"] == "k" and rows[0]["headers"] == {"h": "1"}
    assert rows[-1]["key"] == "gone" and rows[-1]["value"] is None  # a tombstone


def test_numbers_come_back_as_their_text(broker: BrokerProcess) -> None:
    broker.create_topic("nums")
    broker.produce("nums", [{"value": 42}, {"value": True}])
    assert [r["value"] for r in broker.fetch_all("nums")] == ["42", "true"]


def test_binary_keys_and_values_are_byte_equal(broker: BrokerProcess) -> None:
    broker.create_topic("bin")
    blobs = [bytes(range(256)), b"\xff\xfe\x00", b"", b"\x80" * 1000]
    broker.produce(
        "bin",
        [
            {
                "key_b64": base64.b64encode(b).decode(),
                "value_b64": base64.b64encode(b[::-1]).decode(),
            }
            for b in blobs
        ],
    )
    rows = broker.fetch_all("bin", value_format="base64")
    assert [base64.b64decode(r["key_b64"]) for r in rows] == blobs
    assert [base64.b64decode(r["value_b64"]) for r in rows] == [b[::-1] for b in blobs]


def _arrow_body(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def test_arrow_stream_round_trip(broker: BrokerProcess) -> None:
    broker.create_topic("arrow", partitions=2)
    n = 5000
    table = pa.table(
        {
            "key": pa.array([None] * n, pa.binary()),
            "value": pa.array([f"value-{i}".encode() for i in range(n)], pa.binary()),
            "partition": pa.array([1] * n, pa.int32()),
            "timestamp": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()),
        }
    )
    r = broker.http.post(
        "/topics/arrow/records", content=_arrow_body(table), headers={"content-type": ARROW}
    )
    assert r.status_code == 200, r.text
    assert r.json()["partitions"] == [
        {"partition": 1, "base_offset": 0, "last_offset": n - 1, "record_count": n}
    ]
    got: list[pa.RecordBatch] = []
    offset = 0
    while offset < n:
        resp = broker.http.get(
            "/topics/arrow/partitions/1/records",
            params={"offset": offset, "max_records": 2000},
            headers={"accept": ARROW},
        )
        assert resp.headers["content-type"].startswith(ARROW)
        fetched = pa.ipc.open_stream(resp.content).read_all()
        got.extend(fetched.to_batches())
        offset = int(resp.headers["x-tierlog-next-offset"])
    result = pa.Table.from_batches(got)
    assert result.column("offset").to_pylist() == list(range(n))
    assert result.column("value").to_pylist() == table.column("value").to_pylist()
    assert (
        result.column("timestamp").cast(pa.int64()).to_pylist()
        == table.column("timestamp").to_pylist()
    )


def test_offsets_by_time_and_bounds(broker: BrokerProcess) -> None:
    broker.create_topic("times")
    broker.produce(
        "times", [{"value": str(i), "timestamp": 1_000_000 + i * 10} for i in range(100)]
    )

    def at(value: str) -> object:
        r = broker.http.get("/topics/times/partitions/0/offsets", params={"at": value})
        assert r.status_code == 200, r.text
        return r.json()["offset"]

    assert at("earliest") == 0
    assert at("latest") == 100
    assert at("1000000") == 0
    assert at("1000055") == 6
    assert at("1000990") == 99
    assert at("1001000") is None


def test_long_poll_returns_when_data_arrives(broker: BrokerProcess) -> None:
    broker.create_topic("poll")

    def later() -> None:
        time.sleep(0.5)
        broker.produce("poll", [{"value": "late"}])

    t = threading.Thread(target=later)
    t.start()
    doc = broker.fetch("poll", 0, 0, wait_ms=10_000)
    t.join()
    assert [r["value"] for r in doc["records"]] == ["late"]


def test_long_poll_times_out_empty(broker: BrokerProcess) -> None:
    broker.create_topic("idle")
    doc = broker.fetch("idle", 0, 0, wait_ms=200)
    assert doc["records"] == [] and doc["next_offset"] == 0 and doc["high_watermark"] == 0


def test_concurrent_producers_are_group_committed(broker: BrokerProcess) -> None:
    broker.create_topic("busy")
    errors: list[str] = []

    def worker(w: int) -> None:
        for i in range(20):
            r = broker.http.post(
                "/topics/busy/records",
                json={"records": [{"value": f"{w}-{i}-{j}"} for j in range(10)]},
            )
            if r.status_code != 200:
                errors.append(r.text)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    rows = broker.fetch_all("busy")
    assert [r["offset"] for r in rows] == list(range(8 * 20 * 10))
    assert len({r["value"] for r in rows}) == 1600
    for w in range(8):  # each producer's records keep their order
        mine = [r["value"] for r in rows if r["value"].startswith(f"{w}-")]
        assert mine == [f"{w}-{i}-{j}" for i in range(20) for j in range(10)]
