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

from cluster.search_contract import SearchQuery

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
    offsets = table.column("offset")
    if q.start_offset > 0:
        conds.append(pc.greater_equal(offsets, q.start_offset))
    if q.end_offset < 2**63 - 1:
        conds.append(pc.less(offsets, q.end_offset))
    stamps = table.column("timestamp")
    if q.start_timestamp is not None:
        conds.append(pc.greater_equal(stamps.cast(pa.int64()), q.start_timestamp))
    if q.end_timestamp is not None:
        conds.append(pc.less(stamps.cast(pa.int64()), q.end_timestamp))
    if q.key is not None:
        conds.append(pc.equal(table.column("key"), pa.scalar(q.key, pa.binary())))
    if q.value_contains is not None:
        conds.append(pc.match_substring(table.column("value"), q.value_contains))
    for needle in json_needles(q):
        conds.append(pc.match_substring(table.column("value"), needle))
    if not conds:
        return None
    mask = conds[0]
    for c in conds[1:]:
        mask = pc.and_kleene(mask, c)
    return pc.fill_null(mask, False)  # a null key or value (tombstone) matches nothing


def json_needles(q: SearchQuery) -> list[str]:
    """Substrings any value matching the JSON condition must hold (a prefilter): the field
    names as JSON strings and the wanted value's JSON text, where these have one spelling."""
    if q.json_path is None:
        return []
    needles = [f'"{p}"' for p in q.json_path if isinstance(p, str) and _plain(p)]
    text = orjson.dumps(q.json_value).decode()
    if isinstance(q.json_value, str):
        if _plain(q.json_value):
            needles.append(text)
    elif isinstance(q.json_value, bool | int) or q.json_value is None:
        needles.append(text)  # floats have several spellings (1.0, 1e0): no prefilter
    return needles


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
