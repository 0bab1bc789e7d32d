"""tiering/typed_columns.py's one-pass writing: a file is planned with its first batch's
schema ids, and written again with every id when a later batch brings one it lacks."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow.parquet as pq

from coldstore.parquet_writer import EXTRA_BATCH_ROWS, write_parquet
from logformat.frame import encode_frame
from logformat.records import build_batch
from schemaformat.base import ParsedSchema
from schemaformat.kinds import kinds
from schemaformat.typed_decode import ID_PREFIX, TypedDecoder
from schemaformat.wire import frame
from tiering.typed_columns import BatchTypes, TypedColumns, typed_parquet

V1 = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}]}
V2 = {
    "type": "record",
    "name": "R",
    "fields": [{"name": "n", "type": "long"}, {"name": "s", "type": ["null", "string"]}],
}


class Lookup:
    def __init__(self) -> None:
        self.schemas = {i: kinds()["AVRO"].parse(json.dumps(d), {}) for i, d in ((1, V1), (2, V2))}

    def schema(self, schema_id: int) -> ParsedSchema:
        return self.schemas[schema_id]

    def latest_id(self) -> int | None:
        return 2


def _value(i: int, late: int) -> tuple[bytes, dict[str, Any]]:
    doc, row = (V2, {"n": i, "s": f"s{i}"}) if i >= late else (V1, {"n": i})
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(doc), row)
    return frame(2 if i >= late else 1, out.getvalue()), row


def _segment(records: int, late: int) -> tuple[bytes, list[dict[str, Any]]]:
    frames, rows = [], []
    for base in range(0, records, 1000):
        pairs = [_value(i, late) for i in range(base, min(base + 1000, records))]
        rows += [r for _, r in pairs]
        batch = build_batch(
            [None] * len(pairs), [v for v, _ in pairs], [None] * len(pairs), [None] * len(pairs), 0
        )
        frames.append(bytes(encode_frame(batch, base_offset=base, compression="zstd")))
    return b"".join(frames), rows


def _write(segment: bytes, tmp: Any) -> tuple[Any, TypedColumns, list[set[int] | None]]:
    attempts: list[set[int] | None] = []

    def write(columns: TypedColumns) -> Any:
        attempts.append(columns.planned)
        return write_parquet(segment, tmp / "f.parquet", extra=columns)

    parquet, columns = typed_parquet(write, TypedDecoder(ID_PREFIX, Lookup()), BatchTypes(None))
    return parquet, columns, attempts


def test_a_schema_id_first_seen_after_the_first_batch_writes_the_file_again(tmp_path: Any) -> None:
    late = EXTRA_BATCH_ROWS + 1000  # the second batch of the writer brings schema id 2
    segment, rows = _segment(late + 2000, late)
    parquet, columns, attempts = _write(segment, tmp_path)
    assert attempts == [None, {1, 2}]
    assert columns.planned == {1, 2} and not columns.reasons
    table = pq.read_table(parquet.output)
    assert table.num_rows == len(rows)
    assert table.column("value_error").null_count == len(rows)
    want = [{"n": r["n"], "s": r.get("s")} for r in rows]
    assert table.column("value_typed").to_pylist() == want


def test_a_file_of_one_schema_id_is_written_once(tmp_path: Any) -> None:
    segment, rows = _segment(3000, 10**9)
    parquet, columns, attempts = _write(segment, tmp_path)
    assert attempts == [None] and columns.planned == {1}
    assert pq.read_table(parquet.output).column("value_typed").to_pylist() == rows


def test_typed_columns_do_not_change_the_files_row_groups(tmp_path: Any) -> None:
    # Row groups are sized by the record columns: a typed file has as many groups as a
    # bytes-only file of the same records, not more, smaller ones (each about as many rows;
    # the typed file's groups end on whole runs of EXTRA_BATCH_ROWS records).
    segment, rows = _segment(2 * EXTRA_BATCH_ROWS + 3000, 10**9)
    size = 1 << 18  # several groups in the file
    plain = write_parquet(segment, tmp_path / "plain.parquet", row_group_bytes=size)

    def write(columns: TypedColumns) -> Any:
        return write_parquet(segment, tmp_path / "t.parquet", row_group_bytes=size, extra=columns)

    typed, _ = typed_parquet(write, TypedDecoder(ID_PREFIX, Lookup()), BatchTypes(None))
    assert plain.row_groups > 1 and typed.row_groups == plain.row_groups

    def group_rows(path: Any) -> list[int]:
        meta = pq.ParquetFile(path).metadata
        return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]

    for got, want in zip(group_rows(typed.output), group_rows(plain.output), strict=True):
        assert abs(got - want) <= want // 10
    assert pq.read_table(typed.output).column("value_typed").to_pylist() == rows


def test_integer_leaves_of_typed_columns_are_delta_packed(tmp_path: Any) -> None:
    # DELTA_BINARY_PACKED for every integer leaf of the typed columns (through structs,
    # lists and maps; dates and timestamps too), none for the record columns, and the values
    # read back the same by pyarrow and polars.
    import polars as pl
    import pyarrow as pa

    from coldstore.parquet_writer import delta_integer_columns
    from logformat.schema import CONSUMER_SCHEMA

    typed = pa.struct(
        [
            ("n", pa.int64()),
            ("s", pa.string()),
            ("xs", pa.list_(pa.field("element", pa.int64()))),
            ("m", pa.map_(pa.string(), pa.int64())),
            ("at", pa.timestamp("us", tz="UTC")),
            ("day", pa.date32()),
            ("inner", pa.struct([("x", pa.float64()), ("k", pa.int64())])),
        ]
    )
    schema = CONSUMER_SCHEMA.append(pa.field("value_typed", typed))
    assert set(delta_integer_columns(schema)) == {
        "value_typed.n",
        "value_typed.xs.list.element",
        "value_typed.m.key_value.value",
        "value_typed.at",
        "value_typed.day",
        "value_typed.inner.k",
    }
    segment, rows = _segment(3000, 1000)
    parquet, _, _ = _write(segment, tmp_path)
    meta = pq.ParquetFile(parquet.output).metadata.row_group(0)
    encodings = {
        meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)
    }
    assert "DELTA_BINARY_PACKED" in encodings["value_typed.n"]
    assert "DELTA_BINARY_PACKED" not in encodings["offset"] + encodings["value_typed.s"]
    want = [{"n": r["n"], "s": r.get("s")} for r in rows]
    assert pq.read_table(parquet.output).column("value_typed").to_pylist() == want
    assert pl.read_parquet(parquet.output)["value_typed"].to_list() == want
