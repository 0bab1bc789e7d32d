"""`tierlog broker`'s data-path flags: a flag, else TIERLOG_<FLAG>, else DataLimits' default."""

from __future__ import annotations

import argparse

import pytest

from ingest.data_limits import DataLimits
from tierlog.cli.data_limit_opts import add_data_limit_flags, data_limits


def _parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_data_limit_flags(parser)
    return parser.parse_args(list(argv))


def test_flags_then_environment_then_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    assert data_limits(_parsed()) == DataLimits()
    monkeypatch.setenv("TIERLOG_FETCH_MAX_BYTES", "1000")
    monkeypatch.setenv("TIERLOG_KAFKA_MAX_CREATE_TOPICS", "7")
    got = data_limits(_parsed("--kafka-max-create-topics", "9", "--max-headers-per-record", "3"))
    assert got == DataLimits(fetch_max_bytes=1000, max_create_topics=9, max_headers_per_record=3)
