"""Client command details a newcomer meets (issue 27): `topics alter`'s help names the
syntax that works and bare NAME=VALUE works too (S10); `lake describe` prints a table's
path, version, files and per-partition offsets and bytes (item 4)."""

from __future__ import annotations

import argparse

import pytest

from tierlog.cli.commands import add_client_commands
from tierlog.cli.lake_cmd import describe_lines
from tierlog.cli.topics_cmd import _configs, in_s3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tierlog")
    add_client_commands(parser.add_subparsers(dest="command", required=True), "http://x:1")
    return parser


def test_topics_help_names_the_alter_syntax_that_works(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["topics", "--help"])
    assert "alter     set configs (--config NAME=VALUE)" in capsys.readouterr().out
    args = _parser().parse_args(
        [
            "topics",
            "alter",
            "t",
            "segment.ms=1000",
            "cleanup.policy=compact",
            "--config",
            "retention.ms=",
        ]
    )
    assert _configs([*args.pairs, *args.config]) == {
        "segment.ms": "1000",
        "cleanup.policy": "compact",
        "retention.ms": None,  # restores the default
    }


LAKE = {
    "topic": "greetings",
    "table_uri": "s3://tierlog/topics/greetings",
    "remote_storage_enable": True,
    "version": 2,
    "files": [],
    "partitions": [
        {
            "partition": 0,
            "first_offset": 0,
            "last_offset": 1,
            "files": 1,
            "size_bytes": 2048,
            "records": 2,
        },
        {
            "partition": 1,
            "first_offset": None,
            "last_offset": None,
            "files": 0,
            "size_bytes": 0,
            "records": 0,
        },
    ],
    "totals": {"files": 1, "size_bytes": 2048, "records": 2},
    "versions": [],
    "next_before": None,
}


def test_lake_describe_prints_the_table_and_each_partition() -> None:
    assert describe_lines(LAKE) == [
        "Topic: greetings\tTable: s3://tierlog/topics/greetings\tVersion: 2\tFiles: 1"
        "\tRecords: 2\tSize: 2.0 KiB",
        "\tPartition: 0\tOffsets: 0-1\tFiles: 1\tRecords: 2\tSize: 2.0 KiB",
        "\tPartition: 1\tOffsets: -\tFiles: 0\tRecords: 0\tSize: 0 B",
    ]
    empty = {**LAKE, "version": None, "remote_storage_enable": False}
    assert describe_lines(empty)[0].split("\t")[2] == "Version: none"
    assert "this topic is not tiered" in describe_lines(empty)[1]


def test_topics_describe_says_how_much_is_in_s3() -> None:
    p = {
        "log_start_offset": 0,
        "high_watermark": 10,
        "cold": {"start": 0, "end": 6},
        "cold_bytes": 3 << 20,
    }
    assert in_s3(p, True) == "6 of 10 records, 3.0 MiB"
    assert in_s3({**p, "cold": None, "cold_bytes": 0}, True) == "0 of 10 records, 0 B"
    assert in_s3({**p, "high_watermark": None}, True) == "?"  # its leader did not answer
    assert in_s3(p, False) == "- (remote.storage.enable=false)"
