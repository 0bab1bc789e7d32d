"""A topic's Delta table history, read from the log entries themselves (docs/design.md §4).

What each version did: when, which operation, how many data files (and bytes, records) it
added and removed, and the offset range of each partition it added. Read with plain S3
GETs of `_delta_log/{version:020d}.json`, not deltalake's history(): deltalake holds the GIL
through its S3 requests (see delta_table.exists) and numbers commits relative to its own
snapshot, while the entries say exactly what was committed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from coldstore.layout import PARTITION_COLUMN
from coldstore.object_store import ObjectNotFoundError, ObjectStore

_ENTRY = re.compile(r"/_delta_log/(\d{20})\.json$")
_READ_THREADS = 8


class OffsetRange(NamedTuple):
    partition: int
    first: int
    last: int  # inclusive


class DeltaCommit(NamedTuple):
    version: int
    timestamp: int | None  # ms since the epoch, from commitInfo
    operation: str | None  # commitInfo's operation: CREATE TABLE, WRITE, DELETE, ...
    files_added: int
    files_removed: int
    bytes_added: int
    bytes_removed: int
    records_added: int
    added_ranges: list[OffsetRange]  # per partition, over the files this version added
    schema_string: str | None = None  # the metaData action's table schema, if it set one
    added_paths: tuple[str, ...] = ()  # the data files it added, relative to the table root


def _stats(add: dict[str, Any]) -> tuple[int, int | None, int | None]:
    """(records, min offset, max offset) from an add action's stats JSON."""
    raw = add.get("stats")
    doc = json.loads(raw) if isinstance(raw, str) and raw else {}
    low = (doc.get("minValues") or {}).get("offset")
    high = (doc.get("maxValues") or {}).get("offset")
    return int(doc.get("numRecords") or 0), low, high


def _merge(ranges: dict[int, OffsetRange], partition: int, low: int, high: int) -> None:
    seen = ranges.get(partition)
    if seen is not None:
        low, high = min(low, seen.first), max(high, seen.last)
    ranges[partition] = OffsetRange(partition, low, high)


def parse_commit(version: int, text: str) -> DeltaCommit:
    """One log entry (newline-delimited JSON actions) → what it did."""
    info: dict[str, Any] = {}
    added = removed = bytes_added = bytes_removed = records = 0
    ranges: dict[int, OffsetRange] = {}
    schema: str | None = None
    paths: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "commitInfo" in action:
            info = action["commitInfo"] or {}
        elif "add" in action:
            add = action["add"]
            added += 1
            paths.append(str(add.get("path")))
            bytes_added += int(add.get("size") or 0)
            n, low, high = _stats(add)
            records += n
            part = (add.get("partitionValues") or {}).get(PARTITION_COLUMN)
            if part is not None and low is not None and high is not None:
                _merge(ranges, int(part), int(low), int(high))
        elif "metaData" in action:
            schema = (action["metaData"] or {}).get("schemaString")
        elif "remove" in action:
            removed += 1
            bytes_removed += int(action["remove"].get("size") or 0)
    ts = info.get("timestamp")
    return DeltaCommit(
        version,
        int(ts) if isinstance(ts, int) else None,
        info.get("operation") if isinstance(info.get("operation"), str) else None,
        added,
        removed,
        bytes_added,
        bytes_removed,
        records,
        sorted(ranges.values()),
        schema if isinstance(schema, str) else None,
        tuple(paths),
    )


def entry_versions(keys: Iterable[str]) -> list[int]:
    """The versions whose JSON entry is among `keys` (checkpoints and others skipped)."""
    return sorted(int(m.group(1)) for k in keys if (m := _ENTRY.search(k)) is not None)


class DeltaHistory:
    """The history of the Delta table whose root is `table_key` in the store's bucket."""

    def __init__(self, store: ObjectStore, table_key: str) -> None:
        self._store = store
        self._log = f"{table_key.rstrip('/')}/_delta_log/"

    def versions(self) -> list[int]:
        """Every version whose log entry is still in the bucket, oldest first ([] when the
        table does not exist yet)."""
        return entry_versions(key for key, _ in self._store.list(self._log))

    def commits(self, versions: Sequence[int]) -> list[DeltaCommit]:
        """What each of `versions` did, in the order given (an entry removed meanwhile by log
        cleanup is left out)."""

        def read(version: int) -> DeltaCommit | None:
            try:
                text = self._store.get(f"{self._log}{version:020d}.json").decode()
            except ObjectNotFoundError:
                return None
            return parse_commit(version, text)

        with ThreadPoolExecutor(min(_READ_THREADS, max(1, len(versions)))) as pool:
            return [c for c in pool.map(read, versions) if c is not None]

    def paths_added_since(self, since_ms: int) -> set[str] | None:
        """The data files added by every commit made at or after `since_ms`, read newest
        first a page at a time; None when log cleanup removed an entry of that span (nobody
        can say then)."""
        versions = self.versions()
        added: set[str] = set()
        for end in range(len(versions), 0, -_READ_THREADS):
            page = versions[max(0, end - _READ_THREADS) : end][::-1]
            commits = self.commits(page)
            if len(commits) != len(page):
                return None  # cleaned up meanwhile
            for commit in commits:
                added.update(commit.added_paths)
                if commit.timestamp is not None and commit.timestamp < since_ms:
                    return added  # this commit and every older one predate `since_ms`
        return added if versions and versions[0] == 0 else None
