"""ConsumerRecord as a view of fetched Arrow rows: the named-tuple API users had, fields
converted only when read, and the same rows as Arrow batches for poll_arrow()."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from logformat.schema import CONSUMER_SCHEMA
from tierlog.client.consumer_records import ARROW_RECORDS_SCHEMA, ConsumerRecord, RecordRows


def rows() -> RecordRows:
    table = pa.table(
        {
            "offset": pa.array([7, 8, 9], pa.int64()),
            "timestamp": pa.array([1000, 2000, 3000], pa.int64()).cast(
                CONSUMER_SCHEMA.field("timestamp").type
            ),
            "key": pa.array([b"k", None, b""], pa.binary()),
            "value": pa.array([b"a", b"b", None], pa.binary()),
            "headers": pa.array(
                [[{"key": "h", "value": b"1"}, {"key": "n", "value": None}], None, []],
                CONSUMER_SCHEMA.field("headers").type,
            ),
        },
        schema=CONSUMER_SCHEMA,
    )
    return RecordRows("t", 3, table)


def test_rows_read_as_records_with_every_field() -> None:
    got = list(rows().records(0, 3))
    assert [tuple(r) for r in got] == [
        ("t", 3, 7, 1000, b"k", b"a", [("h", b"1"), ("n", None)]),
        ("t", 3, 8, 2000, None, b"b", []),
        ("t", 3, 9, 3000, b"", None, []),
    ]
    assert all(isinstance(r, ConsumerRecord) for r in got)


def test_columns_are_converted_only_when_a_record_reads_them() -> None:
    rs = rows()
    first = next(rs.records(0, 1))
    assert first.value == b"a"
    assert "values" in vars(rs) and "keys" not in vars(rs) and "headers" not in vars(rs)


def test_a_fetched_record_equals_the_record_built_from_its_values() -> None:
    fetched = next(rows().records(1, 2))
    built = ConsumerRecord("t", 3, 8, 2000, None, b"b", [])
    assert fetched == built == ("t", 3, 8, 2000, None, b"b", [])
    assert repr(fetched) == repr(built)
    assert repr(built).startswith("ConsumerRecord(topic='t', partition=3, offset=8")
    topic, partition, offset, *_ = fetched
    assert (topic, partition, offset, fetched[2], len(fetched)) == ("t", 3, 8, 8, 7)
    assert fetched._asdict()["value"] == b"b"
    assert fetched._replace(value=b"z").value == b"z" and fetched.value == b"b"
    assert pickle.loads(pickle.dumps(fetched)) == built
    assert sorted([built._replace(offset=9), built])[0].offset == 8
    with pytest.raises(TypeError):
        hash(built)  # headers are a list, as in the named tuple
    assert hash(built._replace(headers=())) == hash(("t", 3, 8, 2000, None, b"b", ()))


def test_records_never_share_a_headers_list() -> None:
    a, b = rows().records(1, 3)
    a.headers.append(("x", None))
    assert b.headers == []


def test_rows_as_an_arrow_batch_name_topic_and_partition() -> None:
    batch = rows().batch(1, 3)
    assert batch.schema == ARROW_RECORDS_SCHEMA
    assert batch.column("topic").to_pylist() == ["t", "t"]
    assert batch.column("partition").to_pylist() == [3, 3]
    assert batch.column("offset").to_pylist() == [8, 9]
    assert batch.column("value").to_pylist() == [b"b", None]
