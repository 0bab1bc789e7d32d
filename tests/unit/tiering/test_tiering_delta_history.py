"""What a Delta log entry says a version did (coldstore/delta_history.py), from entries as
deltalake writes them for tierlog's commits."""

from __future__ import annotations

import json

from coldstore.delta_history import OffsetRange, entry_versions, parse_commit


def _add(partition: int, low: int, high: int, size: int) -> str:
    stats = {
        "numRecords": high - low + 1,
        "minValues": {"offset": low},
        "maxValues": {"offset": high},
    }
    add = {
        "path": f"partition={partition}/{low:020d}-x.parquet",
        "size": size,
        "partitionValues": {"partition": str(partition)},
        "stats": json.dumps(stats),
    }
    return json.dumps({"add": add})


def test_parse_commit_counts_files_bytes_and_offset_ranges() -> None:
    text = "\n".join(
        [
            json.dumps({"commitInfo": {"timestamp": 1700000000000, "operation": "WRITE"}}),
            json.dumps({"txn": {"appId": "t-0", "version": 10}}),
            _add(0, 0, 9, 100),
            _add(0, 10, 19, 110),
            _add(1, 5, 7, 50),
            json.dumps({"remove": {"path": "partition=1/old.parquet", "size": 70}}),
            "",
        ]
    )
    c = parse_commit(3, text)
    assert (c.version, c.timestamp, c.operation) == (3, 1700000000000, "WRITE")
    assert (c.files_added, c.files_removed, c.bytes_added, c.bytes_removed) == (3, 1, 260, 70)
    added = ((0, 0), (0, 10), (1, 5))
    assert c.added_paths == tuple(f"partition={p}/{lo:020d}-x.parquet" for p, lo in added)
    assert c.records_added == 23
    assert c.added_ranges == [OffsetRange(0, 0, 19), OffsetRange(1, 5, 7)]


def test_parse_commit_of_a_table_creation() -> None:
    text = json.dumps({"commitInfo": {"timestamp": 5, "operation": "CREATE TABLE"}}) + "\n"
    text += json.dumps({"metaData": {"id": "x"}}) + "\n" + json.dumps({"protocol": {}})
    c = parse_commit(0, text)
    assert c.operation == "CREATE TABLE" and c.files_added == 0 and c.added_ranges == []


def test_entry_versions_skip_checkpoints_and_others() -> None:
    keys = [
        "p/topics/t/_delta_log/00000000000000000000.json",
        "p/topics/t/_delta_log/00000000000000000010.checkpoint.parquet",
        "p/topics/t/_delta_log/00000000000000000010.json",
        "p/topics/t/_delta_log/_last_checkpoint",
        "p/topics/t/_delta_log/00000000000000000002.json",
    ]
    assert entry_versions(keys) == [0, 2, 10]
