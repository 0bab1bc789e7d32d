"""Expansion limits on produce bodies (issue 13 item 1): bombs are measured and refused
before they are decoded; ordinary streams and JSON bodies pass unchanged."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest

from logformat.errors import ErrorCode, TierlogError
from logformat.expansion import (
    UNLIMITED,
    ExpansionLimits,
    check_json_records,
    json_record_bound,
    measure_arrow,
    read_arrow_stream,
)
from logformat.ipc_metadata import declared_size

MiB = 1024 * 1024
LIMITS = ExpansionLimits(max_records=100_000, max_decoded_bytes=16 * MiB, max_ratio=100)


def stream(table: pa.Table, compression: str | None = None, chunk: int | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    opts = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=opts) as w:
        w.write_table(table, max_chunksize=chunk)
    return sink.getvalue().to_pybytes()


def _refused(code: ErrorCode, body: bytes, limits: ExpansionLimits = LIMITS) -> str:
    with pytest.raises(TierlogError) as info:
        read_arrow_stream(body, limits)
    assert info.value.code is code, info.value
    return info.value.message


@pytest.mark.parametrize("compression", [None, "zstd", "lz4"])
def test_declared_size_of_an_ordinary_stream(compression: str | None) -> None:
    values = [b"v%05d" % i * 20 for i in range(5000)]
    table = pa.table({"key": pa.array([b"k"] * 5000), "value": pa.array(values)})
    body = stream(table, compression, chunk=1000)
    declared = declared_size(body)
    assert declared.records == 5000
    # The buffers' bytes (padding included) plus 8 bytes per value slot.
    assert table.nbytes <= declared.decoded_bytes <= table.nbytes + 8 * 2 * 5000 + 4096
    assert read_arrow_stream(body, LIMITS).equals(table)


def test_fifty_million_null_records_are_refused_from_a_few_bytes() -> None:
    body = stream(pa.table({"value": pa.nulls(50_000_000)}), "zstd")
    assert len(body) < 10_000
    message = _refused(ErrorCode.RECORD_LIST_TOO_LARGE, body)
    assert "50000000 records" in message and "--max-request-records" in message


def test_a_gigabyte_of_zeros_is_refused_before_decompression() -> None:
    zeros = pa.array([bytes(MiB)] * 64, pa.binary())  # 64 MiB here; the limit is 16
    body = stream(pa.table({"value": zeros}), "zstd")
    assert len(body) < 100_000
    assert declared_size(body).decoded_bytes > 64 * MiB
    assert "--max-request-decoded-bytes" in _refused(ErrorCode.MESSAGE_TOO_LARGE, body)


def test_the_ratio_cap() -> None:
    zeros = pa.array([bytes(MiB)] * 4, pa.binary())  # 4 MiB of zeros, thousands of times
    body = stream(pa.table({"value": zeros}), "zstd")
    assert "--max-compression-ratio" in _refused(ErrorCode.MESSAGE_TOO_LARGE, body)
    lenient = LIMITS._replace(max_ratio=float("inf"))
    assert read_arrow_stream(body, lenient).num_rows == 4
    # Small bodies may expand freely: a decoded size under 1 MiB is never refused for it.
    small = stream(pa.table({"value": pa.array([bytes(100_000)] * 5)}), "zstd")
    assert read_arrow_stream(small, LIMITS).num_rows == 5


def test_dictionary_and_view_columns_are_charged_their_expanded_size() -> None:
    one_mib = pa.array([bytes(MiB)])
    indices = pa.array([0] * 1000, pa.int32())  # 1000 x 1 MiB once decoded: 1 GiB
    bomb = pa.DictionaryArray.from_arrays(indices, one_mib)
    body = stream(pa.table({"value": bomb}))
    assert len(body) < 2 * MiB
    assert "decodes to" in _refused(ErrorCode.MESSAGE_TOO_LARGE, body)
    # Views: 1000 views of the same 1 MiB data buffer.
    view = (MiB).to_bytes(4, "little") + bytes(12)  # length, prefix, buffer 0, offset 0
    views = pa.Array.from_buffers(
        pa.binary_view(), 1000, [None, pa.py_buffer(view * 1000), pa.py_buffer(bytes(MiB))]
    )
    body = stream(pa.table({"value": views}))
    assert "decodes to" in _refused(ErrorCode.MESSAGE_TOO_LARGE, body)
    # A small dictionary column is fine.
    fine = pa.DictionaryArray.from_arrays(pa.array([0, 1] * 100, pa.int32()), pa.array(["a", "b"]))
    assert read_arrow_stream(stream(pa.table({"value": fine})), LIMITS).num_rows == 200


def test_garbage_is_still_an_invalid_record() -> None:
    good = stream(pa.table({"value": pa.array([b"x"] * 10)}), "zstd")
    for body in (b"", b"garbage", good[:-20], good[:40] + bytes(200)):
        with pytest.raises(TierlogError) as info:
            measure_arrow(body, UNLIMITED)
            read_arrow_stream(body, UNLIMITED)
        assert info.value.code is ErrorCode.INVALID_RECORD, body


def _json(records: list[object], **extra: object) -> bytes:
    return orjson.dumps({**extra, "records": records})


def test_json_record_bound_counts_records_not_braces_in_strings_or_headers() -> None:
    records = [
        {"value": "{{{{ [[[ }}}"},
        {"key": '"{"', "value": {"nested": {"deeper": [{}]}}, "headers": {"h": "{"}},
        {"headers": [{"key": "a", "value": "b"}, ["c", "{"]]},
        {},
    ]
    assert json_record_bound(_json(records)) == 4
    assert json_record_bound(_json([{}] * 10_000)) == 10_000
    assert json_record_bound(b'{"records":[]}') == 0
    assert json_record_bound(b'{"records":[{"value":"\\"{"}]}') == 1  # escaped quote


def test_a_json_body_of_empty_records_is_refused_before_parsing() -> None:
    limits = LIMITS._replace(max_records=1000)
    check_json_records(_json([{"value": "{" * 5000}] * 1000), limits)  # braces in strings
    body = b'{"records":[' + b",".join([b"{}"] * 3_000_000) + b"]}"  # 9 MB
    with pytest.raises(TierlogError) as info:
        check_json_records(body, limits)
    assert info.value.code is ErrorCode.RECORD_LIST_TOO_LARGE
    assert "up to 3000000 records" in info.value.message
