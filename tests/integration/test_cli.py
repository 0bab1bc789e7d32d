"""The client commands against a real broker: topics, produce from stdin, consume."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.brokers import BrokerProcess


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics."""
    return module_broker


def tierlog(
    *args: str, stdin: bytes | None = None, check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(
        [sys.executable, "-m", "tierlog", *args], input=stdin, capture_output=True, timeout=60
    )
    if check:
        assert result.returncode == 0, result.stderr.decode()
    return result


def test_topics_produce_consume(broker: BrokerProcess) -> None:
    url = ["--url", broker.url]
    out = tierlog(
        "topics", "create", "clicks", "--partitions", "3", "--config", "retention.ms=3600000", *url
    )
    assert b"created topic clicks" in out.stdout
    assert b"clicks\tpartitions=3" in tierlog("topics", "list", *url).stdout
    described = tierlog("topics", "describe", "clicks", "--output", "json", *url).stdout
    assert b'"retention.ms": "3600000"' in described

    lines = b"".join(b"user%d:click %d\n" % (i % 4, i) for i in range(30))
    tierlog("produce", "clicks", "--key-sep", ":", *url, stdin=lines)
    out = tierlog(
        "consume", "clicks", "--from-beginning", "--print-key", "--timeout-ms", "1000", *url
    ).stdout
    got = sorted(out.decode().splitlines())
    assert got == sorted(f"user{i % 4}\tclick {i}" for i in range(30))

    # Per key, order is kept (one key → one partition).
    out = tierlog(
        "consume", "clicks", "--from-beginning", "--print-key", "--timeout-ms", "1000", *url
    ).stdout
    for k in range(4):
        mine = [
            line.split("\t")[1]
            for line in out.decode().splitlines()
            if line.startswith(f"user{k}\t")
        ]
        assert mine == [f"click {i}" for i in range(30) if i % 4 == k]


def test_consume_one_partition_from_offset(broker: BrokerProcess) -> None:
    url = ["--url", broker.url]
    tierlog("topics", "create", "seq", *url)
    tierlog("produce", "seq", *url, stdin=b"".join(b"line %d\n" % i for i in range(10)))
    out = tierlog(
        "consume",
        "seq",
        "--partition",
        "0",
        "--offset",
        "7",
        "--print-offset",
        "--max-records",
        "3",
        *url,
    ).stdout
    assert out.decode().splitlines() == ["0:7\tline 7", "0:8\tline 8", "0:9\tline 9"]


def test_cli_reports_errors_plainly(broker: BrokerProcess) -> None:
    result = tierlog("topics", "describe", "missing", "--url", broker.url, check=False)
    assert result.returncode == 1
    assert b"UNKNOWN_TOPIC_OR_PARTITION" in result.stderr
    result = tierlog("topics", "list", "--url", "http://127.0.0.1:9", check=False)
    assert result.returncode == 1 and b"connection refused by http://127.0.0.1:9" in result.stderr
