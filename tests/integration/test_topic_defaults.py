"""A broker's defaults for new topics (`--topic-default NAME=VALUE`, Kafka's broker-level
log.segment.bytes / log.roll.ms): what `tierlog dev` uses so that records reach S3 within
seconds (issue 27 item 1). A creator's own value wins, and null asks for Kafka's default."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy.engine import Engine

from logformat.errors import ErrorCode, TierlogError
from metadata.brokers import BrokerRepo
from metadata.topics import TopicRepo
from tierlog.cli.topic_defaults import parse_topic_defaults

DEFAULTS = {"segment.bytes": "1048576", "segment.ms": "5000"}


@pytest.fixture
def repo(db_engine: Engine) -> TopicRepo:
    BrokerRepo(db_engine).register(1, "http://127.0.0.1:9001", 60_000)
    return TopicRepo(db_engine, DEFAULTS)


def test_new_topics_get_the_defaults_unless_their_creator_sets_them(repo: TopicRepo) -> None:
    assert repo.create("plain", 1, 1).configs == DEFAULTS
    mine = repo.create("mine", 1, 1, {"segment.ms": "60000", "retention.ms": "1000"})
    assert mine.configs == {
        "retention.ms": "1000",
        "segment.bytes": "1048576",
        "segment.ms": "60000",
    }
    # null: "the default" in Kafka's sense, not the broker's (PATCH's meaning of null too)
    assert repo.create("kafkas", 1, 1, {"segment.ms": None}).configs == {"segment.bytes": "1048576"}
    assert TopicRepo(repo.engine).create("none", 1, 1).configs == {}  # no defaults: as before


def test_defaults_are_checked_as_topic_configs() -> None:
    assert parse_topic_defaults(["segment.ms=5000", "segment.bytes = 1048576"], None) == (
        ("segment.bytes", "1048576"),
        ("segment.ms", "5000"),
    )
    assert parse_topic_defaults(None, "segment.ms=5000,") == (("segment.ms", "5000"),)
    assert parse_topic_defaults(None, None) == ()
    for bad, why in (
        (["segment.ms"], "expected NAME=VALUE"),
        (["segment.ms=soon"], "invalid value for segment.ms"),
        (["segmentms=5"], "unknown topic config 'segmentms'"),
    ):
        with pytest.raises(TierlogError) as raised:
            parse_topic_defaults(bad, None)
        assert raised.value.code is ErrorCode.INVALID_CONFIG and why in raised.value.message


def test_a_broker_refuses_a_bad_default_at_start() -> None:
    out = subprocess.run(
        [
            *(sys.executable, "-m", "tierlog", "broker", "--insecure"),
            *(
                "--database-url",
                "postgresql://127.0.0.1:1/none",
                "--topic-default",
                "segment.ms=-1",
            ),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "tierlog broker: --topic-default: invalid value for segment.ms" in out.stderr
