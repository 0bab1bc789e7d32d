"""`tierlog consume`, `tierlog groups` and `tierlog replay` against a real broker."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from logformat.partitioner import partition_for_key
from tests.integration.brokers import BrokerProcess
from tests.integration.cli_runner import run_command as command
from tests.integration.cluster import wait_for
from tierlog import Admin, Producer


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics and groups."""
    return module_broker


def tierlog(
    *args: str, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """`tierlog ARGS` in a process of its own: as a user runs it (main's error printing)."""
    result = subprocess.run(
        [sys.executable, "-m", "tierlog", *args], capture_output=True, timeout=timeout
    )
    if check:
        assert result.returncode == 0, result.stderr.decode()
    return result


def produce(url: str, topic: str, values: list[bytes], **kw: object) -> None:
    with Producer(url, linger_ms=1) as producer:
        for v in values:
            producer.send(topic, v, **kw)  # type: ignore[arg-type]
        producer.flush()


def test_consume_from_beginning_prints_every_record_in_order(broker: BrokerProcess) -> None:
    broker.create_topic("lines", partitions=1)
    values = [b"line %d" % i for i in range(500)] + [b"bytes \xff\x00 end"]
    produce(broker.url, "lines", values)
    out = command(
        "consume",
        "lines",
        "--from-beginning",
        "--max-messages",
        str(len(values)),
        "--url",
        broker.url,
    ).stdout
    assert out == b"".join(v + b"\n" for v in values)


def test_consume_keys_offsets_and_idle_exit(broker: BrokerProcess) -> None:
    broker.create_topic("kv", partitions=2)
    with Producer(broker.url) as producer:
        for i in range(20):
            producer.send("kv", b"v%d" % i, key=b"k%d" % (i % 3))
    out = command(
        "consume",
        "kv",
        "--from-beginning",
        "--key-sep",
        "=",
        "--timeout-ms",
        "1500",
        "--url",
        broker.url,
    ).stdout.decode()
    lines = out.splitlines()
    assert sorted(lines) == sorted(f"k{i % 3}=v{i}" for i in range(20))
    for k in range(3):  # one key, one partition: its records stay in order
        mine = [line for line in lines if line.startswith(f"k{k}=")]
        assert mine == [f"k{k}=v{i}" for i in range(20) if i % 3 == k]
    p = partition_for_key(b"k0", 2)  # holds k0's 7 records at least
    out = command(
        "consume",
        "kv",
        "--partition",
        str(p),
        "--offset",
        "1",
        "--print-offset",
        "--max-messages",
        "2",
        "--url",
        broker.url,
    ).stdout.decode()
    assert [line.split("\t")[0] for line in out.splitlines()] == [f"{p}:1", f"{p}:2"]


def test_consume_with_a_group_resumes_where_it_stopped(broker: BrokerProcess) -> None:
    broker.create_topic("jobs", partitions=2)
    produce(broker.url, "jobs", [b"job-%d" % i for i in range(30)])
    url = ["--url", broker.url]
    first = command(
        "consume", "jobs", "--group", "workers", "--from-beginning", "--max-messages", "10", *url
    ).stdout.splitlines()
    rest = command(
        "consume", "jobs", "--group", "workers", "--from-beginning", "--timeout-ms", "2000", *url
    ).stdout.splitlines()
    assert len(first) == 10
    assert sorted(first + rest) == sorted(b"job-%d" % i for i in range(30))  # none twice
    listing = command("groups", "list", *url).stdout.decode()
    assert "workers\t" in listing
    described = command("groups", "describe", "workers", *url).stdout.decode()
    assert "jobs\t0\t" in described and "jobs\t1\t" in described
    assert "\tLAG\tLAG-TIME\t" in described and described.count("\t0\t0ms\t") == 2  # caught up
    reset = command(
        "groups", "reset-offsets", "workers", "--topic", "jobs", "--to-earliest", *url
    ).stdout.decode()
    assert "jobs\t0\t" in reset
    again = command(
        "consume", "jobs", "--group", "workers", "--timeout-ms", "2000", *url
    ).stdout.splitlines()
    assert sorted(again) == sorted(b"job-%d" % i for i in range(30))
    # The consumers left on exit, so the group is empty and can go.
    assert command("groups", "delete", "workers", *url).stdout == b"deleted group workers\n"
    assert "workers\t" not in command("groups", "list", *url).stdout.decode()


def test_replay_reads_everything_and_reports_the_rate(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    broker.create_topic("history", partitions=3)
    # Spread over every partition: null keys stick to one partition per batch, and one 256 KiB
    # batch holds all 3,000 records, so the ranged replay below could find partition 1 empty.
    with Producer(broker.url, linger_ms=1) as producer:
        for i in range(3000):
            producer.send("history", b"event-%d" % i, partition=i % 3)
        producer.flush()
    out_file = tmp_path / "history.parquet"
    result = command(
        "replay", "history", "--out", str(out_file), "--no-progress", "--url", broker.url
    )
    assert b"replayed 3,000 records" in result.stderr and b"records/s" in result.stderr
    table = pq.read_table(out_file)
    assert sorted(table.column("value").to_pylist()) == sorted(b"event-%d" % i for i in range(3000))
    for p in range(3):
        offsets = [
            o
            for o, q in zip(
                table.column("offset").to_pylist(),
                table.column("partition").to_pylist(),
                strict=True,
            )
            if q == p
        ]
        assert offsets == list(range(len(offsets)))
    jsonl = tmp_path / "part.jsonl"
    command(
        "replay",
        "history",
        "--partition",
        "1",
        "--from-offset",
        "5",
        "--to-offset",
        "8",
        "--out",
        str(jsonl),
        "--no-progress",
        "--url",
        broker.url,
    )
    rows = jsonl.read_text().splitlines()
    assert len(rows) == 3 and '"partition":1' in rows[0] and '"offset":5' in rows[0]


def test_consume_with_a_group_fails_on_an_unknown_topic(broker: BrokerProcess) -> None:
    """As without --group: UNKNOWN_TOPIC_OR_PARTITION, not a silent wait."""
    for group in ([], ["--group", "g1"]):
        out = tierlog("consume", "nosuchtopic", *group, "--url", broker.url, check=False)
        assert out.returncode == 1
        assert out.stderr.decode().startswith("tierlog: UNKNOWN_TOPIC_OR_PARTITION: "), out.stderr


def test_sigterm_makes_a_group_consumer_leave_its_group(broker: BrokerProcess) -> None:
    broker.create_topic("terms", partitions=1)
    url = ["--url", broker.url]
    consumer = subprocess.Popen(
        [sys.executable, "-m", "tierlog", "consume", "terms", "--group", "termed", *url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        with Admin(broker.url) as admin:

            def joined() -> bool:
                groups = {g.name: g.members for g in admin.list_groups()}
                return groups.get("termed", 0) > 0

            wait_for("the consumer joined", joined, timeout=30)
        consumer.send_signal(signal.SIGTERM)
        assert consumer.wait(30) == 128 + signal.SIGTERM
    finally:
        consumer.kill()
        consumer.communicate()
    # It left at once: the group is empty and can go (no session timeout to wait for).
    assert tierlog("groups", "delete", "termed", *url).stdout == b"deleted group termed\n"
