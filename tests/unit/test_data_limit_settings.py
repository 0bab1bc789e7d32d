"""`tierlog broker`'s data-path settings: a flag, else TIERLOG_<NAME>, else DataLimits' default
(one declaration: ingest/settings.py)."""

from __future__ import annotations

import argparse

from ingest.data_limits import DataLimits
from ingest.settings import BROKER, DATA_LIMITS


def _limits(environ: dict[str, str], *argv: str) -> DataLimits:
    parser = argparse.ArgumentParser()
    BROKER.add_flags(parser)
    settings = BROKER.resolve(environ, parser.parse_args(list(argv)))
    return DataLimits(**settings.fields(*DATA_LIMITS))


def test_flags_then_environment_then_defaults() -> None:
    assert _limits({}) == DataLimits()
    env = {"TIERLOG_FETCH_MAX_BYTES": "1000", "TIERLOG_KAFKA_MAX_CREATE_TOPICS": "7"}
    got = _limits(env, "--kafka-max-create-topics", "9", "--max-headers-per-record", "3")
    assert got == DataLimits(fetch_max_bytes=1000, max_create_topics=9, max_headers_per_record=3)
