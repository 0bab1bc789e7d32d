"""`tierlog produce` under a produce quota (issue 27 S2): it waits out each 429 and sends the
request again, as the Python Producer does, so every line goes in once and in order; when it
finally gives up it says how many records were acknowledged before the failure."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.test_quotas import _quotas

RATE = 60_000  # bytes/s for every principal (the <default> entity covers the anonymous one)


@pytest.fixture(scope="module")
def rated_broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    db = db_factory()
    _quotas(db, "set", "--default", "--producer-byte-rate", str(RATE))
    b = BrokerProcess(db, tmp_path_factory.mktemp("rated") / "data-1", 1)
    try:
        yield b.start()
    finally:
        b.stop()


def _produce(
    broker: BrokerProcess, lines: list[str], *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tierlog", "produce", "rated", "--url", broker.url, *extra],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=240,
    )


def _line(i: int) -> str:
    return f"{i:06d} " + "x" * 90


def test_produce_waits_out_throttles_then_reports_what_went_in(rated_broker: BrokerProcess) -> None:
    rated_broker.create_topic("rated")
    # A first quota-checked request starts the broker's quota load; let it land.
    rated_broker.http.get("/topics/rated/partitions/0/records", params={"offset": 0})
    time.sleep(0.5)
    lines = [_line(i) for i in range(3000)]  # ~300 KB: several seconds over the quota
    out = _produce(rated_broker, lines, "--batch-size", "200")
    assert out.returncode == 0, out.stderr
    assert "produced 3,000 records" in out.stderr, out.stderr
    values = [r["value"] for r in rated_broker.fetch_all("rated")]
    assert values == lines  # each line once, in order
    metrics = rated_broker.http.get("/metrics").text
    assert re.search(
        r'tierlog_quota_throttled_requests_total\{kind="produce"[^}]*\} [1-9]', metrics
    )

    # Now give up at the first throttle: the command says how many records went in first.
    more = [_line(i) for i in range(3000, 6000)]
    out = _produce(rated_broker, more, "--batch-size", "200", "--retry-timeout-ms", "0")
    assert out.returncode == 1, out.stderr
    said = re.search(
        r"failed: ([\d,]+) record\(s\) acknowledged by rated before this error", out.stderr
    )
    assert said is not None, out.stderr
    assert "THROTTLING_QUOTA_EXCEEDED" in out.stderr
    acknowledged = int(said.group(1).replace(",", ""))
    values = [r["value"] for r in rated_broker.fetch_all("rated")]
    assert values == lines + more[:acknowledged]  # exactly what it said, nothing after
