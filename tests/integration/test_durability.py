"""Restarts, kill -9 and torn tails: acknowledged records survive, offsets stay dense.

The tests share one broker (a start takes seconds): each uses its own topic, and a restart or
a kill that one test does only recovers the others' topics along with its own."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import httpx
import pytest

from http_transport.trust import default_trust
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """The module's broker, running (started again if a test before left it killed)."""
    if module_broker.proc is None or module_broker.proc.poll() is not None:
        module_broker.start()
    return module_broker


def _segments(b: BrokerProcess, topic: str, partition: int = 0) -> list[Path]:
    return sorted((b.data_dir / f"{topic}-{partition}").glob("*.log"))


def test_restart_keeps_records_and_offsets(broker: BrokerProcess) -> None:
    broker.create_topic("keep", partitions=2)
    broker.produce("keep", [{"value": f"a{i}", "partition": i % 2} for i in range(100)])
    broker.restart()
    offsets = broker.produce("keep", [{"value": "after", "partition": 0}])
    assert offsets == [{"partition": 0, "offset": 50}]
    rows = broker.fetch_all("keep", 0)
    assert [r["offset"] for r in rows] == list(range(51))
    assert rows[-1]["value"] == "after"
    assert broker.http.get("/topics/keep").json()["partitions"][1]["log_end_offset"] == 50


def test_kill_9_during_produce_loses_no_acknowledged_record(broker: BrokerProcess) -> None:
    b = broker
    b.create_topic("crash", partitions=1, segment_bytes=64 * 1024)
    acked: list[tuple[int, str]] = []
    stop = threading.Event()

    def produce_loop(worker: int) -> None:
        client = httpx.Client(verify=default_trust(), base_url=b.url, timeout=5)
        i = 0
        while not stop.is_set():
            batch = [f"w{worker}-{i}-{j}" for j in range(20)]
            try:
                r = client.post(
                    "/topics/crash/records", json={"records": [{"value": v} for v in batch]}
                )
            except httpx.HTTPError:
                continue  # the broker died mid-request: not acknowledged
            if r.status_code == 200:
                acked.extend(
                    (o["offset"], v) for o, v in zip(r.json()["offsets"], batch, strict=True)
                )
            i += 1

    threads = [threading.Thread(target=produce_loop, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    wait_for("records acknowledged while producing", lambda: len(acked) > 100, timeout=30)
    b.kill(signal.SIGKILL)  # the four producers are still sending
    stop.set()
    for t in threads:
        t.join()
    assert len(acked) > 100
    b.start()
    rows = b.fetch_all("crash")
    assert [r["offset"] for r in rows] == list(range(len(rows)))  # dense, no torn record
    by_offset = {r["offset"]: r["value"] for r in rows}
    for offset, value in acked:
        assert by_offset.get(offset) == value
    # The log keeps going densely after recovery.
    assert b.produce("crash", [{"value": "next"}])[0]["offset"] == len(rows)


def test_torn_tail_is_truncated_to_whole_frames(broker: BrokerProcess) -> None:
    broker.create_topic("torn")
    for i in range(10):
        broker.produce("torn", [{"value": f"frame{i}-rec{j}"} for j in range(5)])
    broker.kill(signal.SIGKILL)
    active = _segments(broker, "torn")[-1]
    size = active.stat().st_size
    with open(active, "r+b") as f:
        f.truncate(size - 37)  # cut into the middle of the last frame
    broker.start()
    rows = broker.fetch_all("torn")
    assert [r["offset"] for r in rows] == list(range(45))
    assert rows[-1]["value"] == "frame8-rec4"
    assert broker.produce("torn", [{"value": "again"}])[0]["offset"] == 45


def test_segments_roll_and_seal_by_size(broker: BrokerProcess) -> None:
    broker.create_topic("roll", segment_bytes=4096)
    for i in range(40):
        broker.produce("roll", [{"value": "x" * 200, "key": f"k{i}"}])
    segments = _segments(broker, "roll")
    assert len(segments) > 5
    bases = [int(p.stem) for p in segments]
    assert bases == sorted(bases) and bases[0] == 0
    assert all(p.stat().st_size <= 4096 for p in segments[:-1])
    assert [r["offset"] for r in broker.fetch_all("roll")] == list(range(40))
    broker.restart()
    assert [r["offset"] for r in broker.fetch_all("roll", offset=17)] == list(range(17, 40))


def test_segments_roll_by_time(broker: BrokerProcess) -> None:
    broker.create_topic("timed", segment_ms=500)
    broker.produce("timed", [{"value": "first"}])
    # The broker's roll timer (every second) seals it and starts the next segment.
    wait_for("the segment rolled by time", lambda: len(_segments(broker, "timed")) >= 2)
    broker.produce("timed", [{"value": "second"}])
    assert len(_segments(broker, "timed")) >= 2
    assert [r["value"] for r in broker.fetch_all("timed")] == ["first", "second"]
