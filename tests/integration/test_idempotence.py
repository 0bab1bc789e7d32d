"""Idempotent producers: retries never duplicate; gaps and fenced epochs are refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.brokers import BrokerProcess


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module (a broker start is seconds): each test has its own topic."""
    return module_broker


def _send(
    b: BrokerProcess, pid: int, epoch: int, seq: int, values: list[str], topic: str = "idem"
) -> Any:
    return b.http.post(
        f"/topics/{topic}/records",
        json={"records": [{"value": v, "partition": 0} for v in values]},
        headers={
            "X-Tierlog-Producer-Id": str(pid),
            "X-Tierlog-Producer-Epoch": str(epoch),
            "X-Tierlog-Sequence": str(seq),
        },
    )


def test_retries_are_deduplicated_with_original_offsets(broker: BrokerProcess) -> None:
    broker.create_topic("idem", partitions=2)
    pid = broker.http.post("/producers").json()["producer_id"]
    first = _send(broker, pid, 0, 0, ["a", "b", "c"])
    assert first.status_code == 200, first.text
    again = _send(broker, pid, 0, 0, ["a", "b", "c"])  # the same batch retried
    assert again.json() == first.json()
    assert _send(broker, pid, 0, 3, ["d"]).json()["offsets"] == [{"partition": 0, "offset": 3}]
    assert [r["value"] for r in broker.fetch_all("idem")] == ["a", "b", "c", "d"]
    broker.restart()  # producer state survives a restart (rebuilt from the log)
    assert _send(broker, pid, 0, 3, ["d"]).json()["offsets"] == [{"partition": 0, "offset": 3}]
    assert [r["value"] for r in broker.fetch_all("idem")] == ["a", "b", "c", "d"]


def test_sequence_gap_and_stale_epoch_are_refused(broker: BrokerProcess) -> None:
    broker.create_topic("idem-gap")
    pid = broker.http.post("/producers").json()["producer_id"]
    assert _send(broker, pid, 0, 0, ["a"], "idem-gap").status_code == 200
    gap = _send(broker, pid, 0, 5, ["x"], "idem-gap")
    assert gap.status_code == 409 and gap.json()["error_code"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert _send(broker, pid, 1, 0, ["new epoch"], "idem-gap").status_code == 200
    stale = _send(broker, pid, 0, 1, ["zombie"], "idem-gap")
    assert stale.status_code == 409 and stale.json()["error_code"] == "INVALID_PRODUCER_EPOCH"
    assert [r["value"] for r in broker.fetch_all("idem-gap")] == ["a", "new epoch"]
    many = broker.http.post(
        "/topics/idem-gap/records",
        json={"records": [{"value": "p0"}, {"value": "p1"}]},
        headers={
            "X-Tierlog-Producer-Id": str(pid),
            "X-Tierlog-Producer-Epoch": "1",
            "X-Tierlog-Sequence": "1",
        },
    )
    assert many.status_code == 200  # one partition topic: fine
    partial = broker.http.post(
        "/topics/idem-gap/records",
        json={"records": [{"value": "x"}]},
        headers={"X-Tierlog-Producer-Id": str(pid)},
    )
    assert partial.status_code == 400 and partial.json()["error_code"] == "INVALID_REQUEST"
