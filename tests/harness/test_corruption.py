"""Corrupt frames, in process: a replica serves no bad byte, and puts the frame back in
place from a peer's whole copy of the same frame (ingest/replication/frame_repair.py), even
from a follower out of the ISR, cutting nothing; a committed frame whose only in-sync copy is
bad and that no replica holds whole is reported lost, the rest served.
(tests/integration/test_corruption.py covers fetch nodes and tiering.)"""

from __future__ import annotations

import time

from cluster.http.fetch_response import REPLICA_READ_HEADER
from cluster.internal_http import CLUSTER_TOKEN_HEADER
from logformat.frame import HEADER_SIZE, decode_header
from tests.harness.cluster import InProcessCluster
from tests.harness.node import REPLICA_LAG_MS, Node
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


def _count(b: Node, metric: str, topic: str) -> float:
    """The broker's own counter `metric` for topic-0 (0: none yet)."""
    for line in b.http.get("/metrics").text.splitlines():
        if line.startswith(metric + "{") and f'"{topic}"' in line:
            return float(line.split()[-1])
    return 0.0


REPLACED = "tierlog_corrupt_frames_replaced_total"
TRUNCATED = "tierlog_corrupt_frame_repairs_total"
LOST = "tierlog_corrupt_committed_frames_total"


def _produce_all(c: InProcessCluster, topic: str, frames: range) -> None:
    for f in frames:
        c.produce(topic, [{"key": f"k{i}", "value": _value(i)} for i in range(f * 3, f * 3 + 3)])


def test_a_corrupt_leader_takes_the_frame_back_from_a_follower_and_keeps_leading(
    cluster: InProcessCluster,
) -> None:
    c = cluster
    expected = [_value(i) for i in range(N)]
    c.create_topic("led", segment_bytes=4096, min_insync_replicas=2)
    _produce_all(c, "led", range(FRAMES))
    wait_for(
        "replicas identical",
        lambda: len({b.segment_bytes("led") for b in c.brokers.values()}) == 1,
    )
    whole = c.brokers[next(i for i in c.brokers if i != c.leader("led").broker_id)]
    leader = c.leader("led")
    bad = _flip(leader, "led")
    # The leader's own answer: a clear 503 with a Kafka error name, never the bytes.
    r = leader.http.get("/topics/led/partitions/0/records", params={"offset": bad})
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["error_code"] == "KAFKA_STORAGE_ERROR" and "corrupt" in body["message"], body
    assert f"offset {bad}" in body["message"] or str(bad) in body["message"], body
    # It puts the frame back from a follower's copy: the same bytes, nothing cut, no hand-off.
    # The counter moves just after the bytes are written back: wait for both.
    wait_for(
        "the leader's copy repaired in place",
        lambda: (
            leader.segment_bytes("led") == whole.segment_bytes("led")
            and _count(leader, REPLACED, "led") >= 1
        ),
    )
    assert _values(leader, "led") == expected
    assert c.partition("led")["leader"] == leader.broker_id
    assert _count(leader, REPLACED, "led") == 1
    assert "repaired in place from a peer's whole copy" in c.logs.text(leader.broker_id)


def test_a_corrupt_follower_is_repaired_in_place_without_truncating(
    cluster: InProcessCluster,
) -> None:
    c = cluster
    c.create_topic("fol", segment_bytes=4096, min_insync_replicas=2)
    _produce_all(c, "fol", range(FRAMES))
    wait_for(
        "replicas identical",
        lambda: len({b.segment_bytes("fol") for b in c.brokers.values()}) == 1,
    )
    leader = c.leader("fol")
    follower = c.brokers[next(i for i in c.brokers if i != leader.broker_id)]
    bad = _flip(follower, "fol")
    token = follower.b.cluster_secret
    r = follower.http.get(  # a fetch node's read of an in-sync follower (KIP-392)
        "/topics/fol/partitions/0/records",
        params={"offset": bad},
        headers={CLUSTER_TOKEN_HEADER: token, REPLICA_READ_HEADER: "1"},
    )
    assert r.status_code == 503 and r.json()["error_code"] == "KAFKA_STORAGE_ERROR", r.text
    wait_for(
        "the follower's copy repaired in place",
        lambda: (
            follower.segment_bytes("fol") == leader.segment_bytes("fol")
            and _count(follower, REPLACED, "fol") >= 1
        ),
    )
    assert _count(follower, REPLACED, "fol") == 1
    assert _count(follower, TRUNCATED, "fol") == 0  # not cut and fetched again


def test_a_committed_frame_is_taken_back_from_a_follower_out_of_the_isr(
    cluster: InProcessCluster,
) -> None:
    """The soak's lost frames (issue 26): the leader's copy of a committed frame went bad
    while it was alone in the ISR; the followers, out of the ISR, still hold it whole. No
    replica out of the ISR is elected (Kafka's rule), but a frame is taken for what it is:
    the leader puts it back from a follower's copy, keeps leading and loses nothing."""
    c = cluster
    c.create_topic("back", segment_bytes=4096, min_insync_replicas=1)
    half = FRAMES // 2
    _produce_all(c, "back", range(half))
    wait_for(
        "replicas identical",
        lambda: len({b.segment_bytes("back") for b in c.brokers.values()}) == 1,
    )
    leader = c.leader("back")
    lid = leader.broker_id
    followers = [i for i in c.brokers if i != lid]
    for i in followers:
        c.cut(i, lid)
    c.advance(REPLICA_LAG_MS / 1000 + 1)
    wait_for("the leader alone in the ISR", lambda: c.partition("back")["isr"] == [lid], timeout=30)
    _produce_all(c, "back", range(half, FRAMES))  # committed by the leader alone
    for i in followers:  # the leader reaches them again; their fetches still fail
        c.cut_one_way(i, lid)
    bad = _flip(leader, "back", 2)  # a frame every follower holds whole
    r = leader.http.get("/topics/back/partitions/0/records", params={"offset": bad})
    assert r.status_code == 503 and r.json()["error_code"] == "KAFKA_STORAGE_ERROR", r.text

    def served() -> bool:
        got = leader.http.get("/topics/back/partitions/0/records", params={"offset": bad})
        ok = got.status_code == 200 and got.json()["records"][0]["value"] == _value(bad)
        return ok and _count(leader, REPLACED, "back") >= 1

    wait_for("the frame served again", served, timeout=30)
    part = c.partition("back")
    assert part["leader"] == lid and part["isr"] == [lid], part  # taken from out of the ISR
    assert _count(leader, REPLACED, "back") == 1
    assert _count(leader, LOST, "back") == 0
    c.heal()
    assert _values(leader, "back") == [_value(i) for i in range(N)]


def _flip_at(b: Node, topic: str, offset: int) -> int:
    """Flip one payload byte of the frame holding `offset`, in whichever segment it is;
    the frame's base offset."""
    for path in sorted((b.data_dir / f"{topic}-0").glob("*.log"), key=lambda f: int(f.stem)):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            header = decode_header(data, pos)
            if header.base_offset <= offset <= header.last_offset:
                at = pos + HEADER_SIZE + header.payload_length // 2
                with open(path, "r+b") as f:  # in place: the broker's descriptor sees it
                    f.seek(at)
                    f.write(bytes([data[at] ^ 0x5A]))
                return header.base_offset
            pos += header.size
    raise AssertionError(f"no frame holds offset {offset}")


def test_a_corrupt_only_in_sync_copy_is_reported_lost_and_the_rest_served(
    cluster: InProcessCluster,
) -> None:
    """The soak's stuck partitions (issue 26): the followers left the ISR (they could not
    fetch), the leader alone went on committing, then a frame they did not have yet went
    bad on its disk. No in-sync replica can take over (Kafka elects none out of the ISR), so
    the hand-off never completes: the leader keeps the partition, says once that a
    committed frame lost its only in-sync copy, and serves every whole frame on both sides
    of it, never the bad one."""
    c = cluster
    c.create_topic("only", segment_bytes=4096, min_insync_replicas=1)
    half = FRAMES // 2
    for f in range(half):
        c.produce("only", [{"key": f"k{i}", "value": _value(i)} for i in range(f * 3, f * 3 + 3)])
    leader = c.leader("only")
    lid = leader.broker_id
    for i in c.brokers:
        if i != lid:
            c.cut(i, lid)  # the followers' fetches fail; their heartbeats go on
    c.advance(REPLICA_LAG_MS / 1000 + 1)
    wait_for("the leader alone in the ISR", lambda: c.partition("only")["isr"] == [lid], timeout=30)
    for f in range(half, FRAMES):  # committed by the leader alone (min.insync.replicas=1)
        c.produce("only", [{"key": f"k{i}", "value": _value(i)} for i in range(f * 3, f * 3 + 3)])
    bad = _flip_at(leader, "only", (half + 2) * 3)
    state = leader.b.leader_state("only", 0)
    assert state is not None and bad < state.high_watermark  # committed
    c.heal()  # the followers fetch again, up to the bad frame, and its read reports it
    wait_for("the loss reported", lambda: _count(leader, LOST, "only") == 1, timeout=30)
    assert "committed frame lost" in c.logs.text(lid)
    assert c.partition("only")["leader"] == lid
    r = leader.http.get("/topics/only/partitions/0/records", params={"offset": bad})
    assert r.status_code == 503 and r.json()["error_code"] == "KAFKA_STORAGE_ERROR", r.text
    after = bad + 3  # the next frame: whole, served
    r = leader.http.get("/topics/only/partitions/0/records", params={"offset": after})
    assert r.status_code == 200, r.text
    assert r.json()["records"][0]["value"] == _value(after)
    r = leader.http.get("/topics/only/partitions/0/records", params={"offset": 0})
    assert r.status_code == 200 and r.json()["records"][0]["value"] == _value(0), r.text
    for b in c.brokers.values():  # each follower holds every whole frame below the bad one
        if b.broker_id != lid:
            follower = b.b.replicas
            assert follower is not None
            part = next(s for k, s in follower.partitions.items() if k[0] == "only")
            wait_for(
                f"broker {b.broker_id} up to the bad frame",
                lambda part=part: part.log.log_end_offset == bad,
                timeout=30,
            )
    c.advance(1)  # once said: asking for a hand-off again does not report it again
    assert _count(leader, LOST, "only") == 1
