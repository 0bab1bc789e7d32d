"""A typed lake table's cold files (docs/lake-tables.md) on the fetch node's read path, in
process: real Parquet files with value_typed / value_error beside the record columns."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from cluster.record_match import typed_equal
from cluster.search_contract import SearchQuery
from fetch.cold.cold_search import column_spans, typed_may_match
from fetch.cold.parquet_layout import decode_group, parse_footer
from fetch.cold.typed_read import _joined
from logformat.schema import CONSUMER_SCHEMA

T0 = 1_700_000_000_000
V1 = pa.struct([("id", pa.int64())])
V2 = pa.struct([("id", pa.int64()), ("ship", pa.struct([("city", pa.string())]))])


def _records(first: int, n: int) -> list[pa.Array]:
    return [
        pa.array(range(first, first + n), pa.int64()),
        pa.array([T0 + i for i in range(n)], CONSUMER_SCHEMA.field("timestamp").type),
        pa.array([b"k%d" % i for i in range(n)]),
        pa.array([b"\x00\x00\x00\x00\x01v%d" % i for i in range(n)]),
        pa.array([[] for _ in range(n)], CONSUMER_SCHEMA.field("headers").type),
    ]


def _typed_file() -> bytes:
    typed = pa.array([{"id": 1, "ship": {"city": "Oslo"}}, None, {"id": 3, "ship": None}], V2)
    errors = pa.array([None, "schema id 9: unknown", None], pa.string())
    schema = pa.schema([*CONSUMER_SCHEMA, ("value_typed", V2), ("value_error", pa.string())])
    table = pa.Table.from_arrays([*_records(10, 3), typed, errors], schema=schema)
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=2)
    return sink.getvalue()


def test_a_typed_file_reads_back_as_the_record_columns_only() -> None:
    data = _typed_file()
    layout = parse_footer(data, len(data))
    assert len(layout.groups) == 2
    table = decode_group(layout, [(0, data)], 0)
    assert table.schema.equals(CONSUMER_SCHEMA, check_metadata=True)
    assert table.column("value").to_pylist() == [
        b"\x00\x00\x00\x00\x01v0",
        b"\x00\x00\x00\x00\x01v1",
    ]


def test_parts_of_several_schema_versions_merge_and_missing_columns_are_null() -> None:
    old = pa.table(
        {"offset": pa.array([0, 1], pa.int64()), "value_typed": pa.array([{"id": 7}, None], V1)}
    )
    untyped = pa.table({"offset": pa.array([2], pa.int64())})  # before lake.mode was set
    new = pa.table(
        {
            "offset": pa.array([3, 4], pa.int64()),
            "value_typed": pa.array([{"id": 8, "ship": {"city": "Oslo"}}, None], V2),
            "value_error": pa.array([None, "decode: truncated"]),
        }
    )
    got = _joined([old, untyped, new], ["value_typed", "value_error"], 1, 4)
    assert got.schema.field("value_typed").type == V2
    assert got.column("offset").to_pylist() == [1, 2, 3, 4]
    assert got.column("value_typed").to_pylist() == [
        None,
        None,
        {"id": 8, "ship": {"city": "Oslo"}},
        None,
    ]
    assert got.column("value_error").to_pylist() == [None, None, None, "decode: truncated"]
    first = _joined([old], ["value_typed"], 0, 0)
    assert first.column("value_typed").to_pylist() == [{"id": 7}]


def test_row_groups_whose_field_statistics_rule_the_value_out_are_skipped() -> None:
    data = _typed_file()  # row group 0: Oslo (and a null); row group 1: no city at all
    layout = parse_footer(data, len(data))
    oslo = SearchQuery(typed_path=("ship", "city"), typed_value="Oslo")
    assert typed_may_match(layout, 0, oslo)
    assert not typed_may_match(layout, 0, oslo._replace(typed_value="Zurich"))
    assert not typed_may_match(layout, 0, SearchQuery(typed_path=("id",), typed_value=5))
    assert typed_may_match(layout, 1, SearchQuery(typed_path=("id",), typed_value=3))


def test_typed_equal_matches_the_field_and_never_another_type() -> None:
    column = pa.array([{"id": 1, "ship": {"city": "Oslo"}}, None, {"id": 3, "ship": None}], V2)
    assert typed_equal(column, ("ship", "city"), "Oslo").to_pylist() == [True, None, None]
    assert typed_equal(column, ("id",), 3).to_pylist() == [False, None, True]
    assert not any(typed_equal(column, ("id",), "3").to_pylist())
    assert not any(typed_equal(column, ("id",), True).to_pylist())
    assert not any(typed_equal(column, ("size",), 3).to_pylist())


def test_a_typed_search_reads_the_fields_chunk_only_and_skips_files_without_it() -> None:
    data = _typed_file()
    layout = parse_footer(data, len(data))
    query = SearchQuery(typed_path=("ship", "city"), typed_value="Oslo")
    (span,) = column_spans(layout, 0, [query.predicate_columns()[-1]])
    rg = layout.metadata.row_group(0)
    chunks = {rg.column(j).path_in_schema: rg.column(j) for j in range(rg.num_columns)}
    city = chunks["value_typed.ship.city"]
    assert span[1] - span[0] == city.total_compressed_size  # not value_typed.id's chunk too
    assert not typed_may_match(layout, 0, query._replace(typed_path=("note",)))
