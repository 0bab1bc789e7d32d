"""A Delta schema's columns, nested ones as dotted paths (coldstore/delta_columns.py), from
the metaData action deltalake itself writes for an evolving table."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from coldstore.delta_columns import schema_columns
from coldstore.delta_history import parse_commit


def _table(ship: pa.StructType) -> pa.Table:
    typed = pa.struct([pa.field("id", pa.int64()), pa.field("ship", ship)])
    tags = pa.field("tags", pa.list_(pa.string()))
    schema = pa.schema([pa.field("offset", pa.int64()), pa.field("value_typed", typed), tags])
    return pa.table({"offset": [1], "value_typed": [{"id": 1, "ship": None}], "tags": [[]]}, schema)


def test_columns_of_each_version_as_deltalake_wrote_them(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, _table(pa.struct([pa.field("city", pa.string())])))
    wider = pa.struct([pa.field("city", pa.string()), pa.field("zip", pa.int64())])
    write_deltalake(uri, _table(wider), mode="append", schema_mode="merge")
    log = tmp_path / "t" / "_delta_log"
    commits = [parse_commit(v, (log / f"{v:020d}.json").read_text()) for v in (0, 1)]
    assert all(c.schema_string is not None for c in commits)
    first, second = (schema_columns(c.schema_string or "") for c in commits)
    assert first == [
        ("offset", "long"),
        ("value_typed", "struct"),
        ("value_typed.id", "long"),
        ("value_typed.ship", "struct"),
        ("value_typed.ship.city", "string"),
        ("tags", "array<string>"),
    ]
    assert second == [*first[:5], ("value_typed.ship.zip", "long"), first[5]]


def test_an_entry_without_metadata_has_no_schema() -> None:
    text = json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}})
    assert parse_commit(7, text).schema_string is None
