"""Stored records → consumer output: CONSUMER_SCHEMA batches and fetch JSON (docs/design.md §5).

The rendering rules are documented in logformat.records (the produce side they mirror).
"""

from __future__ import annotations

import base64
from typing import Any, Literal

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from logformat.schema import CONSUMER_SCHEMA

ValueFormat = Literal["auto", "base64", "string"]
VALUE_FORMATS: tuple[ValueFormat, ...] = ("auto", "base64", "string")

_RAW = object()  # "not text": render as *_b64
_WS = frozenset((b" ", b"\t", b"\n", b"\r"))
_JSON_OPEN = (b"{", b"[")


def to_consumer_batch(batch: pa.RecordBatch, base_offset: int) -> pa.RecordBatch:
    """A RECORD_SCHEMA batch with absolute offsets (base_offset + offset_delta, int64)."""
    offsets = pc.add(batch.column(0).cast(pa.int64()), pa.scalar(base_offset, pa.int64()))
    return pa.RecordBatch.from_arrays([offsets, *batch.columns[1:]], schema=CONSUMER_SCHEMA)


def _auto(b: bytes) -> object:
    c = b[:1]
    # Cheap pre-check: only bytes starting with { or [ can be a JSON object or array.
    if c in _JSON_OPEN or (c in _WS and b.lstrip()[:1] in _JSON_OPEN):
        try:
            j = orjson.loads(b)
        except orjson.JSONDecodeError:
            pass
        else:
            if type(j) is dict or type(j) is list:
                return j
    try:
        return b.decode()
    except UnicodeDecodeError:
        return _RAW


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode("ascii")


def _headers_b64(h: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"key": x["key"], "value_b64": _b64(x["value"])} for x in h]


def _headers_auto(h: list[dict[str, Any]]) -> dict[str, Any] | list[dict[str, Any]]:
    out: dict[str, str | None] = {}
    try:
        for x in h:
            name, val = x["key"], x["value"]
            if name in out:
                return _headers_b64(h)  # repeated names need the list form
            out[name] = None if val is None else val.decode()
    except UnicodeDecodeError:
        return _headers_b64(h)
    return out


def _headers_string(h: list[dict[str, Any]]) -> dict[str, Any] | list[dict[str, Any]]:
    items = [
        (x["key"], None if x["value"] is None else x["value"].decode(errors="replace")) for x in h
    ]
    out = dict(items)
    if len(out) == len(items):
        return out
    return [{"key": k, "value": v} for k, v in items]


def _text_column(col: pa.Array) -> list[Any] | None:
    """The column as str (None for null) when every value is valid UTF-8, else None."""
    if col.null_count == len(col):
        return [None] * len(col)
    try:
        # One vectorized UTF-8 validation instead of a decode per record.
        return col.cast(pa.string()).to_pylist()  # type: ignore[no-any-return]
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None


def _json_candidates(col: pa.Array) -> list[int]:
    """Rows whose bytes may be a JSON object or array (first non-space byte { or [)."""
    mask = pc.match_substring_regex(col, r"^[ \t\n\r]*[\[{]")
    if not pc.any(mask).as_py():
        return []
    idx: list[int] = pc.indices_nonzero(mask).to_pylist()
    return idx


def _render_column(
    col: pa.Array, field: str, value_format: ValueFormat
) -> tuple[list[str], list[Any]]:
    """(field name, rendered value) per row: name is `field`, or `field`_b64 for raw bytes."""
    n = len(col)
    b64_field = field + "_b64"
    if value_format == "base64":
        return [b64_field] * n, [_b64(b) for b in col.to_pylist()]
    names = [field] * n
    text = _text_column(col)
    if value_format == "string":
        if text is None:  # some invalid UTF-8: decode row by row, replacing bad bytes
            text = [None if b is None else b.decode(errors="replace") for b in col.to_pylist()]
        return names, text
    if text is None:
        raw = col.to_pylist()
        vals: list[Any] = [None] * n
        for i, b in enumerate(raw):
            if b is not None:
                r = _auto(b)
                if r is _RAW:
                    names[i] = b64_field
                    vals[i] = _b64(b)
                else:
                    vals[i] = r
        return names, vals
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    for i in _json_candidates(col):
        try:
            j = loads(text[i])
        except decode_error:
            continue
        if type(j) is dict or type(j) is list:
            text[i] = j
    return names, text


_HEADER_RENDER = {"auto": _headers_auto, "string": _headers_string, "base64": _headers_b64}


def render_json_records(
    batch: pa.RecordBatch, value_format: ValueFormat = "auto"
) -> list[dict[str, Any]]:
    """Fetch JSON of a CONSUMER_SCHEMA batch: {offset, timestamp, key, value, headers} each."""
    if value_format not in _HEADER_RENDER:
        raise ValueError(f"value_format must be one of {VALUE_FORMATS}, not {value_format!r}")
    n = batch.num_rows
    offsets = batch.column(0).to_pylist()
    timestamps = batch.column(1).cast(pa.int64()).to_pylist()
    knames, keys = _render_column(batch.column(2), "key", value_format)
    vnames, values = _render_column(batch.column(3), "value", value_format)
    hcol = batch.column(4)
    headers: list[Any] = [None] * n
    # Skip the (slow) nested to_pylist when no record has a header.
    if hcol.null_count < n and pc.sum(pc.list_value_length(hcol)).as_py():
        render_headers = _HEADER_RENDER[value_format]
        headers = [render_headers(h) if h else None for h in hcol.to_pylist()]
    return [
        {"offset": o, "timestamp": t, kn: k, vn: v, "headers": h or {}}
        for o, t, kn, k, vn, v, h in zip(
            offsets, timestamps, knames, keys, vnames, values, headers, strict=True
        )
    ]
