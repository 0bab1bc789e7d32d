"""A corrupt frame in the leader's copy, in process: the leader serves no bad byte, hands
leadership to an in-sync replica, and its first fetch as a follower truncates below the bad
frame and fetches it again (ingest/replication/corruption.py), with no read needed to find
it again. (tests/integration/test_corruption.py covers fetch nodes and tiering.)"""

from __future__ import annotations

import time

from logformat.frame import HEADER_SIZE, decode_header
from tests.harness.cluster import InProcessCluster
from tests.harness.node import Node
from tests.integration.cluster import wait_for

FRAMES = 24  # of 3 records each; segment.bytes=4096 seals a segment every few frames
N = FRAMES * 3


def _value(i: int) -> str:
    return f"value-{i:05d}-" + "x" * 100


def _flip(b: Node, topic: str, frame_index: int = 1) -> int:
    """Flip one payload byte of a frame in the broker's first (sealed) segment; its offset."""
    path = b.data_dir / f"{topic}-0" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    pos = 0
    for _ in range(frame_index):
        pos += decode_header(data, pos).size
    header = decode_header(data, pos)
    data[pos + HEADER_SIZE + header.payload_length // 2] ^= 0x5A
    with open(path, "r+b") as f:  # in place: the broker's descriptor sees it
        f.seek(pos)
        f.write(data[pos : pos + header.size])
    return header.base_offset


def _values(b: Node, topic: str) -> list[str]:
    """Every value from offset 0 (JSON): a new leader serves up to its high watermark, which
    reaches the log end once its followers have fetched, so an empty page means not yet."""
    values: list[str] = []
    offset, deadline = 0, time.monotonic() + 30
    while offset < N:
        assert time.monotonic() < deadline, f"stuck at offset {offset}"
        r = b.http.get(f"/topics/{topic}/partitions/0/records", params={"offset": offset})
        assert r.status_code == 200, r.text
        doc = r.json()
        if not doc["records"]:
            time.sleep(0.05)
            continue
        values += [rec["value"] for rec in doc["records"]]
        offset = doc["next_offset"]
    return values


def test_a_corrupt_leader_hands_off_and_its_first_fetch_repairs_it(
    cluster: InProcessCluster,
) -> None:
    c = cluster
    expected = [_value(i) for i in range(N)]
    c.create_topic("led", segment_bytes=4096, min_insync_replicas=2)
    for f in range(FRAMES):
        c.produce("led", [{"key": f"k{i}", "value": _value(i)} for i in range(f * 3, f * 3 + 3)])
    wait_for(
        "replicas identical",
        lambda: len({b.segment_bytes("led") for b in c.brokers.values()}) == 1,
    )
    leader = c.leader("led")
    bad = _flip(leader, "led")
    # The leader's own answer: a clear 503 with a Kafka error name, never the bytes.
    r = leader.http.get("/topics/led/partitions/0/records", params={"offset": 0})
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["error_code"] == "KAFKA_STORAGE_ERROR" and "corrupt" in body["message"], body
    assert f"offset {bad}" in body["message"] or str(bad) in body["message"], body
    # It cannot repair itself from anyone while it leads: it hands leadership off ...
    new = wait_for(
        "another leader",
        lambda: (ld := c.partition("led")["leader"]) not in (None, leader.broker_id) and ld,
    )
    assert _values(c.brokers[new], "led") == expected
    # ... and its first fetch as a follower cuts its log below the bad frame and fetches the
    # rest again: no further read has to meet the frame.
    wait_for(
        "the old leader's copy repaired",
        lambda: leader.segment_bytes("led") == c.brokers[new].segment_bytes("led"),
    )
    assert _values(leader, "led") == expected
