"""The README's Python client example, run as written (on a test broker's URL), twice:
the second run finds its topic (create_topic(exist_ok=True)) and its group's offsets."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from logformat.errors import ErrorCode
from tests.integration.brokers import BrokerProcess
from tierlog import Admin
from tierlog.client.errors import ApiError

ROOT = Path(__file__).resolve().parents[2]


def _readme_example(url: str) -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("\n## Python client\n") :]
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
