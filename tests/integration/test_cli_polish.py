"""What users of Kafka's tools and kcat reach for: --version, help text, kafka-topics' describe
layout, kcat's format strings, headers, starting at a timestamp and exiting at the end (-e).
Help, version and error exits through the real `tierlog` command; the commands that succeed
in-process, through the same parser and functions (tests/integration/cli_runner.py)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import time

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cli_runner import run_command


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics."""
    return module_broker


def tierlog(
    *args: str, stdin: bytes | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "tierlog", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def command(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    """A command that succeeds, in-process (its success asserted), with text output."""
    done = run_command(*args, stdin=stdin)
    return subprocess.CompletedProcess(done.args, 0, done.stdout.decode(), done.stderr.decode())


def _option_help(help_text: str) -> dict[str, str]:
    """Each --option of argparse's help and the text beside (or under) it."""
    found: dict[str, str] = {}
    name = None
    for line in help_text.splitlines():
        m = re.match(r"^  (?:-\w, )?(--[\w-]+)(?: [A-Z_]+)?(?:\s{2,}(.*))?$", line)
        if m:
            name = m.group(1)
            found[name] = m.group(2) or ""
        elif name and line.startswith(" " * 10):
            found[name] += line.strip()
    return found


def test_version_and_help_texts() -> None:
    version = importlib.metadata.version("tierlog")
    assert tierlog("--version").stdout == f"tierlog {version}\n"
    options = _option_help(tierlog("dev", "--help").stdout)
    assert set(options) == {
        "--help",
        "--brokers",
        "--port",
        "--data-dir",
        "--auth",
        "--kafka-defaults",
        "--log-level",
    }
    assert all(options.values()), options  # every option says what it does
    topics = tierlog("topics", "--help").stdout
    for action in ("create", "list", "describe", "alter", "delete"):
        assert re.search(rf"^    {action}\s{{2,}}\S", topics, re.M), topics


def test_topics_describe_like_kafka_topics(broker: BrokerProcess) -> None:
    url = ["--url", broker.url]
    command(
        "topics", "create", "described", "--partitions", "2", "--config", "retention.ms=60000", *url
    )
    command("produce", "described", "--partition", "1", *url, stdin=b"a\nb\nc\n")
    lines = command("topics", "describe", "described", *url).stdout.splitlines()
    assert re.fullmatch(
        r"Topic: described\tTopicId: \S+\tPartitionCount: 2\tReplicationFactor: 1\t"
        r"Configs: .*retention\.ms=60000.*",
        lines[0],
    ), lines[0]
    for line, (p, hw) in zip(lines[1:], ((0, 0), (1, 3)), strict=True):
        assert re.fullmatch(
            rf"\tTopic: described\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\t"
            rf"LogStartOffset: 0\tHighWatermark: {hw}\tHot: 0-{hw}\tCold: -\tTieringLag: \d+"
            rf"\tInS3: 0 of {hw} records, 0 B",
            line,
        ), line  # (no tiering worker here: the lag is what is not tiered yet)
    doc = command("topics", "describe", "described", "--output", "json", *url).stdout
    assert '"high_watermark": 3' in doc and '"name": "described"' in doc


def test_produce_headers_and_consume_format_string(broker: BrokerProcess) -> None:
    url = ["--url", broker.url]
    command("topics", "create", "formatted", "--partitions", "1", *url)
    before = int(time.time() * 1000)
    command(
        *("produce", "formatted", "--key-sep", ":", "-H", "src=cli", "-H", "v=2", *url),
        stdin=b"k1:one\nk2:two\n",
    )
    out = command(
        *("consume", "formatted", "--from-beginning", "-e", *url),
        *("-f", r"%t %p:%o [%k=%s] %K/%S {%h} %T\n"),
    ).stdout.splitlines()
    assert [line.rsplit(" ", 1)[0] for line in out] == [
        "formatted 0:0 [k1=one] 2/3 {src=cli,v=2}",
        "formatted 0:1 [k2=two] 2/3 {src=cli,v=2}",
    ]
    assert all(int(line.rsplit(" ", 1)[1]) >= before for line in out)  # %T: ms timestamps
    bad = tierlog("consume", "formatted", "-f", "%x", "-e", *url, check=False)
    assert bad.returncode == 1 and "--format: unknown token %x" in bad.stderr
    bad = tierlog("produce", "formatted", "-H", "novalue", *url, stdin=b"x\n", check=False)
    assert bad.returncode == 1 and "--header wants NAME=VALUE" in bad.stderr


def test_consume_from_a_timestamp_and_exit_at_the_end(broker: BrokerProcess) -> None:
    url = ["--url", broker.url]
    command("topics", "create", "timed", "--partitions", "2", *url)
    command("produce", "timed", *url, stdin=b"old-1\nold-2\n")
    time.sleep(0.05)  # records of the next batch are stamped strictly later
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    command("produce", "timed", *url, stdin=b"new-1\nnew-2\nnew-3\n")
    # -e: every record there is, then exit (no --max-messages or --timeout-ms needed).
    everything = command("consume", "timed", "--from-beginning", "-e", *url).stdout.split()
    assert sorted(everything) == ["new-1", "new-2", "new-3", "old-1", "old-2"]
    later = command("consume", "timed", "--from-timestamp", str(cut), "-e", *url).stdout.split()
    assert sorted(later) == ["new-1", "new-2", "new-3"]
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(cut // 1000 + 3600)) + "+00:00"
    assert command("consume", "timed", "--from-timestamp", iso, "-e", *url).stdout == ""
    empty = command("consume", "timed", "-e", *url)  # from the end: nothing, and exit
    assert empty.stdout == ""
