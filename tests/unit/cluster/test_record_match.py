"""Search matching (cluster/record_match.py): pyarrow compute, JSON candidates verified."""

from __future__ import annotations

import pyarrow as pa

from cluster.record_match import json_member_pattern, matching_rows
from cluster.search_contract import SearchQuery

VALUES = [
    b'{"seq":7,"kind":"a"}',
    b'{"seq":77}',
    b'{ "seq" : 7 }',
    b'{"x":{"seq":7}}',
    b'{"seq":"7"}',
    b'{"seq":true}',
    b"not json seq 7",
    None,
    b'{"user":{"id":1.0},"tags":["a","b"]}',
]


def table() -> pa.Table:
    n = len(VALUES)
    return pa.table(
        {
            "offset": pa.array(range(100, 100 + n), pa.int64()),
            "timestamp": pa.array(range(n), pa.timestamp("ms", tz="UTC")),
            "key": pa.array([b"k1", b"k2", None, b"k1", b"k1", b"k2", b"k1", b"k1", b"k3"]),
            "value": pa.array(VALUES, pa.binary()),
        }
    )


def rows(q: SearchQuery, limit: int = 100) -> list[int]:
    return list(matching_rows(table(), q, limit).to_pylist())


def test_json_fields_match_by_value_and_kind() -> None:
    assert rows(SearchQuery(json_path=("seq",), json_value=7)) == [0, 2]
    assert rows(SearchQuery(json_path=("seq",), json_value="7")) == [4]
    assert rows(SearchQuery(json_path=("seq",), json_value=True)) == [5]  # not 1 == True
    assert rows(SearchQuery(json_path=("x", "seq"), json_value=7)) == [3]
    assert rows(SearchQuery(json_path=("user", "id"), json_value=1)) == [8]  # no prefilter
    assert rows(SearchQuery(json_path=("tags", 1), json_value="b")) == [8]
    assert rows(SearchQuery(json_path=("seq",), json_value=7), limit=1) == [0]


def test_key_value_and_bounds_combine() -> None:
    assert rows(SearchQuery(key=b"k1")) == [0, 3, 4, 6, 7]
    assert rows(SearchQuery(key=b"k1", value_contains="seq")) == [0, 3, 4, 6]  # null: no
    assert rows(SearchQuery(key=b"k1", start_offset=103, end_offset=107)) == [3, 4, 6]
    assert rows(SearchQuery(key=b"k1", start_timestamp=1, end_timestamp=4)) == [3]


def test_member_pattern_only_where_json_has_one_spelling() -> None:
    assert json_member_pattern(SearchQuery(json_path=("a",), json_value=1.5)) is None
    assert json_member_pattern(SearchQuery(json_path=("a",), json_value='say "hi"')) is None
    assert json_member_pattern(SearchQuery(json_path=("a", 0), json_value=1)) is None
    assert json_member_pattern(SearchQuery(json_path=("a",), json_value=None)) is not None
