"""Which rows of a record table match a search query: pyarrow compute over whole columns
(no Python per record), shared by the hot scan (ingest) and the cold scan (fetch).

A JSON-field condition has no Arrow kernel: the rows whose value holds the field names and
the wanted value's text as substrings are found by compute, and only those candidates are
parsed, until the cap is reached.
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from cluster.search_contract import MAX_OFFSET, SearchQuery

_MISSING = object()


def matching_rows(table: pa.Table | pa.RecordBatch, query: SearchQuery, limit: int) -> pa.Array:
    """Indices (int64, ascending) of at most `limit` rows matching `query`. The table needs
    the columns `query.predicate_columns()` names."""
    mask = _mask(table, query)
    rows = pc.indices_nonzero(mask) if mask is not None else pa.array(range(table.num_rows))
    rows = rows.cast(pa.int64())
    if query.json_path is not None:
        return _json_matches(table.column("value"), rows, query, limit)
    return rows.slice(0, limit)


def _mask(table: pa.Table | pa.RecordBatch, q: SearchQuery) -> Any:
    conds: list[Any] = []
    if q.start_offset > 0:
        conds.append(pc.greater_equal(table.column("offset"), q.start_offset))
    if q.end_offset < MAX_OFFSET:
        conds.append(pc.less(table.column("offset"), q.end_offset))
    if q.start_timestamp is not None:
        stamps = table.column("timestamp").cast(pa.int64())
        conds.append(pc.greater_equal(stamps, q.start_timestamp))
    if q.end_timestamp is not None:
        stamps = table.column("timestamp").cast(pa.int64())
        conds.append(pc.less(stamps, q.end_timestamp))
    if q.key is not None:
        conds.append(pc.equal(table.column("key"), pa.scalar(q.key, pa.binary())))
    if q.value_contains is not None:
        conds.append(pc.match_substring(table.column("value"), q.value_contains))
    for needle in json_needles(q):
        conds.append(pc.match_substring(table.column("value"), needle))
    if q.typed_path is not None:
        conds.append(typed_equal(table.column("value_typed"), q.typed_path, q.typed_value))
    pattern = json_member_pattern(q)
    if pattern is not None:
        conds.append(pc.match_substring_regex(table.column("value"), pattern))
    if not conds:
        return None
    mask = conds[0]
    for c in conds[1:]:
        mask = pc.and_kleene(mask, c)
    return pc.fill_null(mask, False)  # a null key or value (tombstone) matches nothing


def typed_equal(column: Any, path: tuple[str, ...], value: object) -> Any:
    """Rows whose struct field at `path` equals `value` (false where the column's struct has
    no such field, or the value cannot be of the field's type: a text field never equals 7)."""
    nothing = pa.array([False] * len(column), pa.bool_())
    for name in path:
        if not pa.types.is_struct(column.type) or column.type.get_field_index(name) < 0:
            return nothing
        column = pc.struct_field(column, name)
    if isinstance(value, bool) != pa.types.is_boolean(column.type):
        return nothing  # 1 == True in Python, not in JSON
    if isinstance(value, str) != (pa.types.is_string(column.type) or _is_time(column.type)):
        return nothing
    try:
        wanted = pa.scalar(value).cast(column.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return nothing
    return pc.equal(column, wanted)


def _is_time(t: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(t) or pa.types.is_date(t))


def json_needles(q: SearchQuery) -> list[str]:
    """Substrings any value matching the JSON condition must hold (a prefilter): the field
    names as JSON strings, where these have one spelling."""
    if q.json_path is None:
        return []
    return [f'"{p}"' for p in q.json_path[:-1] if isinstance(p, str) and _plain(p)]


def json_member_pattern(q: SearchQuery) -> str | None:
    """A regular expression (RE2) any matching value holds: the last field's member with the
    wanted value, `"seq"\\s*:\\s*7(\\.0+)?\\s*[,}]`, when the value is spelled one way in
    JSON (floats and escaped text are not: then only the field names prefilter)."""
    if q.json_path is None or not isinstance(q.json_path[-1], str):
        return None
    name, value = q.json_path[-1], q.json_value
    if not _plain(name) or isinstance(value, float):
        return None
    if isinstance(value, str) and not _plain(value):
        return None
    text = _re2(orjson.dumps(value).decode())
    if isinstance(value, int) and not isinstance(value, bool):
        text += r"(\.0+)?"  # 1 == 1.0 in JSON (1e0 is not searched for)
    return _re2(f'"{name}"') + r"\s*:\s*" + text + r"\s*[,}]"


def _re2(text: str) -> str:
    """`text` matched literally (ASCII): every character but letters and digits escaped."""
    return "".join(c if c.isalnum() else f"\\x{ord(c):02x}" for c in text)


def _plain(s: str) -> bool:
    """Text whose JSON spelling is itself in quotes (nothing escaped, ASCII only)."""
    return s.isascii() and s.isprintable() and '"' not in s and "\\" not in s


def _json_matches(values: Any, rows: pa.Array, q: SearchQuery, limit: int) -> pa.Array:
    """The candidates whose value parses as JSON with the field equal to the wanted value."""
    assert q.json_path is not None
    found: list[int] = []
    candidates = pc.take(values, rows)
    for i, raw in zip(rows.to_pylist(), candidates.to_pylist(), strict=True):
        if raw is None:
            continue
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if _field(doc, q.json_path) == q.json_value and _same_kind(doc, q):
            found.append(i)
            if len(found) >= limit:
                break
    return pa.array(found, pa.int64())


def _same_kind(doc: object, q: SearchQuery) -> bool:
    """1 == True in Python, not in JSON."""
    assert q.json_path is not None
    return isinstance(_field(doc, q.json_path), bool) == isinstance(q.json_value, bool)


def _field(doc: object, path: tuple[str | int, ...]) -> object:
    for step in path:
        if isinstance(doc, dict) and isinstance(step, str):
            doc = doc.get(step, _MISSING)
        elif isinstance(doc, list) and isinstance(step, int) and -len(doc) <= step < len(doc):
            doc = doc[step]
        elif isinstance(doc, dict) and isinstance(step, int):
            doc = doc.get(str(step), _MISSING)
        else:
            return _MISSING
    return doc
