"""Which Delta version added each column of a topic's table (the console's Lake page).

A typed lake table (docs/lake-tables.md) gains columns, nested ones too, as its values'
schema evolves; each such change is a metaData action in the Delta log. Walking the
entries' schemas oldest first, a column's version is the first whose schema has it. Log
entries never change once written, so `ColumnVersions` keeps what it has read and reads
only the versions committed since (log cleanup may have removed the oldest entries: then
the oldest entry left is the earliest version this can name).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

from coldstore.delta_history import DeltaHistory


class Column(NamedTuple):
    path: str  # dotted, as Spark SQL names a nested field: value_typed.ship.city
    type: str  # the Delta type: long, string, struct, array<string>, map<string,long>, ...
    added_in: int  # the first version whose schema has the column


def _type_text(t: Any) -> str:
    if isinstance(t, str):
        return t
    kind = t.get("type")
    if kind == "array":
        return f"array<{_type_text(t.get('elementType'))}>"
    if kind == "map":
        return f"map<{_type_text(t.get('keyType'))},{_type_text(t.get('valueType'))}>"
    return str(kind)


def _fields(struct: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted path, type) of every field, a struct before its fields."""
    for field in struct.get("fields") or []:
        path, t = f"{prefix}{field['name']}", field["type"]
        yield path, _type_text(t)
        if isinstance(t, dict) and t.get("type") == "struct":
            yield from _fields(t, path + ".")


def schema_columns(schema_string: str) -> list[tuple[str, str]]:
    """A Delta schemaString's columns, nested fields included, in the schema's order."""
    return list(_fields(json.loads(schema_string)))


class ColumnVersions:
    """The version that added each column of one table, read incrementally."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read_to = -1  # every version <= this has been read
        self._added: dict[str, int] = {}
        self._latest: list[tuple[str, str]] = []  # the newest schema's columns

    def columns(self, history: DeltaHistory, versions: list[int]) -> list[Column]:
        """The table's current columns with their versions (`versions`: the log's, oldest
        first, as DeltaHistory.versions gives them)."""
        with self._lock:
            new = [v for v in versions if v > self._read_to]
            for commit in history.commits(new):  # in the order given: oldest first
                if commit.schema_string is None:
                    continue
                self._latest = schema_columns(commit.schema_string)
                for path, _ in self._latest:
                    self._added.setdefault(path, commit.version)
            if new:
                self._read_to = new[-1]
            return [Column(p, t, self._added[p]) for p, t in self._latest]
