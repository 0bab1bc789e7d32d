"""The client examples the README links to, run as written on a test broker (its URL and Kafka
address in place of dev's): docs/python-client.md's twice (the second run finds its topic and
its group's offsets), and docs/kafka.md's kcat lines and confluent-kafka program, whose keys
land on the partitions HTTP would pick (issue 27 S9: murmur2_random)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logformat.errors import ErrorCode
from logformat.partitioner import partition_for_key
from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port
from tierlog import Admin
from tierlog.client.errors import ApiError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def readme_broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, str]]:
    """One broker for the module, with a Kafka listener (dev's 9092 is replaced by it)."""
    kafka = f"127.0.0.1:{free_port()}"
    data = tmp_path_factory.mktemp("readme") / "data-1"
    b = BrokerProcess(db_factory(), data, 1, ["--kafka-listen", kafka])
    try:
        yield b.start(), kafka
    finally:
        b.stop()


@pytest.fixture(scope="module")
def module_broker(readme_broker: tuple[BrokerProcess, str]) -> BrokerProcess:
    return readme_broker[0]


def _readme_example(url: str) -> str:
    section = (ROOT / "docs" / "python-client.md").read_text()
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1).replace("http://127.0.0.1:8080", url)


def test_readme_client_example_runs_twice(module_broker: BrokerProcess) -> None:
    script = _readme_example(module_broker.url)
    offsets = []
    for run in (1, 2):
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, f"run {run}: {out.stderr}"
        first = re.match(
            r"RecordMetadata\(topic='orders', partition=(\d+), offset=(\d+)", out.stdout
        )
        assert first is not None, out.stdout  # the example's first send() and its metadata
        offsets.append((int(first.group(1)), int(first.group(2))))
    # The second run's record is appended after the first's, in the same partition (its key).
    assert offsets[1][0] == offsets[0][0] and offsets[1][1] > offsets[0][1], offsets


def test_create_topic_exist_ok_and_the_cli_if_not_exists(module_broker: BrokerProcess) -> None:
    with Admin(module_broker.url) as admin:
        made = admin.create_topic("once", partitions=2)
        with pytest.raises(ApiError) as raised:
            admin.create_topic("once", partitions=2)
        assert raised.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
        again = admin.create_topic("once", partitions=5, exist_ok=True)  # as it is: 2
        assert again.partitions == made.partitions and len(again.partitions) == 2
    cli = [sys.executable, "-m", "tierlog", "topics", "create", "once", "--url", module_broker.url]
    out = subprocess.run([*cli, "--if-not-exists"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "topic once exists with 2 partition(s)\n"
    out = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "TOPIC_ALREADY_EXISTS" in out.stderr


def _blocks(lang: str) -> list[str]:
    section = (ROOT / "docs" / "kafka.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt: kcat)")
def test_readme_kafka_examples_run_as_written(readme_broker: tuple[BrokerProcess, str]) -> None:
    broker, bootstrap = readme_broker
    env = {
        **os.environ,
        "TIERLOG_URL": broker.url,  # what `tierlog` commands default to
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    kcat = _blocks("sh")[0].replace("127.0.0.1:9092", bootstrap)
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", kcat],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # kcat's consume (%p:%o %k=%s), then the same two records over HTTP (tierlog consume).
    consumed = sorted(line.split(" ", 1)[1] for line in lines if re.match(r"\d+:\d+ ", line))
    assert consumed == ["alice=10", "bob=20"], out.stdout
    # kcat put each key where HTTP and Kafka's Java client put it (murmur2), not CRC32's choice.
    placed = {
        line.split(" ", 1)[1]: int(line.split(":")[0])
        for line in lines
        if re.match(r"\d+:\d+ ", line)
    }
    assert placed == {
        "alice=10": partition_for_key(b"alice", 3),
        "bob=20": partition_for_key(b"bob", 3),
    }
    assert {"alice\t10", "bob\t20"} <= set(lines), out.stdout  # tierlog consume, over HTTP
    assert "3 partitions" in out.stdout  # kcat -L
    program = _blocks("python")[0].replace("127.0.0.1:9092", bootstrap)
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    printed = out.stdout.splitlines()
    # The group read all five records: kcat's two and the program's three.
    assert len(printed) == 5, out.stdout
    assert sum("b'carol'" in line and "('source', b'kafka')" in line for line in printed) == 3
    carol = {int(line.split()[0]) for line in printed if "b'carol'" in line}
    assert carol == {partition_for_key(b"carol", 3)}
