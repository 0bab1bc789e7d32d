"""Output columns: exactly the Arrow schema Spark expects, text and JSON values."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from logformat.schema import CONSUMER_SCHEMA
from spark_tables.columns import (
    OutputConverter,
    ddl_schema,
    infer_value_type,
    parse_json,
    spark_schema,
    utf8,
)
from spark_tables.options import OptionError, parse_options

T = pa.struct([("n", pa.int64()), ("s", pa.string())])


def opts(**o: str):  # type: ignore[no-untyped-def]
    return parse_options({"topic": "t", **o}, {})


def consumer_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [
            {
                "offset": 7,
                "timestamp": 1_700_000_000_123,
                "key": b"k",
                "value": b'{"n":1}',
                "headers": [{"key": "h", "value": b"\x00"}],
            },
            {
                "offset": 8,
                "timestamp": 1_700_000_000_124,
                "key": None,
                "value": None,
                "headers": None,
            },
        ],
        schema=CONSUMER_SCHEMA,
    )


@pytest.mark.parametrize("value_format", ["binary", "string"])
def test_converted_batches_have_exactly_sparks_arrow_schema(value_format: str) -> None:
    schema = spark_schema(opts(valueFormat=value_format, keyFormat="string"))
    out = OutputConverter(schema, "orders").convert(consumer_batch(), 3)
    assert out.schema.equals(to_arrow_schema(schema, timezone="UTC"))
    row = out.to_pylist()[0]
    assert (row["topic"], row["partition"], row["offset"], row["key"]) == ("orders", 3, 7, "k")
    assert row["timestamp"].timestamp() == 1_700_000_000.123
    assert row["headers"] == [{"key": "h", "value": b"\x00"}]


def test_json_values_become_a_struct_and_bad_ones_null() -> None:
    values = [
        b'{"n": 1, "s": "a", "extra": 0}',
        None,
        b"[1, 2]",
        b"not json",
        b'{"n": "x"}',
        b'{\n "n": 2}',
        b'{"s": "only s"}',
    ]
    got = parse_json(pa.array(values, pa.binary()), T).to_pylist()
    assert got == [
        {"n": 1, "s": "a"},
        None,
        None,
        None,
        None,
        {"n": 2, "s": None},
        {"n": None, "s": "only s"},
    ]
    fast = parse_json(pa.array([b'{"n": 5}', None], pa.binary()), T)
    assert fast.to_pylist() == [{"n": 5, "s": None}, None]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert utf8(pa.array([b"ok", b"\xff", None])).to_pylist() == ["ok", "\ufffd", None]


def test_schema_inference_and_ddl() -> None:
    inferred = infer_value_type([b'{"n": 1, "s": "x", "z": null}', b"junk", b'{"n": 2.5}'])
    assert inferred == StructType(
        [
            StructField("n", inferred["n"].dataType),
            StructField("s", StringType()),
            StructField("z", StringType()),
        ]
    )
    assert inferred["n"].dataType.simpleString() == "double"
    assert infer_value_type([b'{"n": 1}'])["n"].dataType == LongType()
    with pytest.raises(OptionError, match="valueSchema"):
        infer_value_type([b"plain", None])  # type: ignore[list-item]
    ddl = ddl_schema(opts(valueFormat="json", valueSchema="struct<a INT>"))
    assert "value STRUCT<a INT>" in ddl and ddl.startswith("topic STRING NOT NULL")


def test_dates_and_timestamps_parse_from_iso_text_on_both_paths() -> None:
    t = pa.struct([("ts", pa.timestamp("us", tz="UTC")), ("d", pa.date32())])
    good = b'{"ts": "2024-01-02T03:04:05Z", "d": "2024-01-02"}'
    for values in ([good], [good, b"not json"]):  # the C++ reader, then the per-row path
        got = parse_json(pa.array(values, pa.binary()), t).to_pylist()[0]
        assert got is not None
        assert (got["ts"].isoformat(), got["d"].isoformat()) == (
            "2024-01-02T03:04:05+00:00",
            "2024-01-02",
        )
    bad_date = parse_json(pa.array([good, b'{"d": "someday"}'], pa.binary()), t)
    assert bad_date.to_pylist()[1] is None


def test_the_columns_option_narrows_the_schema_and_the_output() -> None:
    o = opts(columns="value, key", keyFormat="string", valueFormat="json", valueSchema="n BIGINT")
    assert o.columns == ("key", "value")  # in the source's column order
    assert ddl_schema(o) == "key STRING, value STRUCT<n BIGINT>"
    schema = spark_schema(opts(columns="partition,timestamp"))
    assert schema.names == ["partition", "timestamp"]
    # the reader decoded only the columns asked for (and offset, which it always reads)
    out = OutputConverter(schema, "orders").convert(
        consumer_batch().select(["offset", "timestamp"]), 3
    )
    assert out.schema.equals(to_arrow_schema(schema, timezone="UTC"))
    assert [r["partition"] for r in out.to_pylist()] == [3, 3]
    for bad in ("key,nope", "key,key", " , "):
        if bad.strip(" ,"):
            with pytest.raises(OptionError, match="columns must name distinct columns"):
                opts(columns=bad)


def test_json_of_a_sliced_array_and_of_values_that_are_not_one_line() -> None:
    values = pa.array([b'{"n": 0}', b'{"n": 1}', None, b'{"n": 3}', b"", b'{"n": 5}'])
    assert parse_json(values.slice(1, 3), T).to_pylist() == [
        {"n": 1, "s": None},
        None,
        {"n": 3, "s": None},
    ]
    # an empty value is no line of its own: the row-by-row path keeps rows aligned
    assert parse_json(values, T).to_pylist()[3:] == [{"n": 3, "s": None}, None, {"n": 5, "s": None}]
    crlf = pa.array([b'{"n": 1}\r', b'{"n": 2}'])
    assert parse_json(crlf, T).to_pylist() == [{"n": 1, "s": None}, {"n": 2, "s": None}]
