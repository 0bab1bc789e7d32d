"""The whole producer against an in-memory leader that follows the broker's idempotence
rules, through a transport that loses answers, refuses connections and reorders requests:
every record lands exactly once, in send order per partition."""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

import httpx
import orjson
import pyarrow as pa
import pytest

from tierlog.client import Producer
from tierlog.client.errors import ApiError

PARTITIONS = 3


class FakeLeader:
    """Sequence checks as ingest/unified/producer_state.py: duplicates of the last 5 batches are
    answered with their offsets, gaps refused, unknown producers taken at any sequence."""

    def __init__(self, seed: int, faults: bool) -> None:
        self.rng = random.Random(seed)
        self.faults = faults
        self.logs: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        self.batches: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        self.next_pid = 100
        self.requests = 0
        self.lost_answers = 0

    def _json(self, doc: Any, status: int = 200) -> httpx.Response:
        return httpx.Response(status, content=orjson.dumps(doc))

    async def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/brokers":
            return self._json({"brokers": [{"id": 1, "url": "http://fake", "alive": True}]})
        if path == "/producers":
            self.next_pid += 1
            return self._json({"producer_id": self.next_pid, "producer_epoch": 0}, 201)
        if request.method == "GET" and path == "/topics/t":
            parts = [{"partition": p, "leader": 1, "leader_epoch": 0} for p in range(PARTITIONS)]
            return self._json({"name": "t", "partitions": parts})
        assert path == "/topics/t/records", path
        self.requests += 1
        roll = self.rng.random() if self.faults else 1.0
        if roll < 0.1:
            raise httpx.ConnectError("refused", request=request)  # never reached the leader
        await asyncio.sleep(self.rng.random() * 0.005 if self.faults else 0)  # reorders
        response = self._append(request)
        if roll < 0.3:
            self.lost_answers += 1
            raise httpx.ReadTimeout("answer lost", request=request)  # written, answer lost
        return response

    def _append(self, request: httpx.Request) -> httpx.Response:
        table = pa.ipc.open_stream(request.content).read_all()
        (p,) = set(table.column("partition").to_pylist())
        values = table.column("value").to_pylist()
        pid = int(request.headers["x-tierlog-producer-id"])
        seq = int(request.headers["x-tierlog-sequence"])
        last_seq = seq + len(values) - 1
        cached = self.batches.setdefault((pid, p), [])
        for first, last, base in cached:
            if (first, last) == (seq, last_seq):
                return self._reply(p, base, len(values))
        if cached and seq != cached[-1][1] + 1:
            doc = {
                "error_code": "OUT_OF_ORDER_SEQUENCE_NUMBER",
                "message": "gap",
                "expected_sequence": cached[-1][1] + 1,
            }
            return self._json(doc, 409)
        base = len(self.logs[p])
        self.logs[p].extend(values)
        cached.append((seq, last_seq, base))
        del cached[:-5]
        return self._reply(p, base, len(values))

    def _reply(self, p: int, base: int, n: int) -> httpx.Response:
        part = {"partition": p, "base_offset": base, "last_offset": base + n - 1, "record_count": n}
        return self._json({"record_count": n, "partitions": [part]})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_retries_through_faults_write_every_record_once_in_order(seed: int) -> None:
    leader = FakeLeader(seed, faults=True)
    producer = Producer(
        "http://fake",
        transport=httpx.MockTransport(leader.handle),
        linger_ms=1,
        batch_size=200,
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
    )
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    futures = []
    try:
        for i in range(600):
            value = b"record-%d" % i
            key = b"key-%d" % (i % 7)
            futures.append((producer.send("t", value, key=key), value))
        producer.flush(60)
    finally:
        producer.close(10)
    for future, value in futures:
        md = future.result(0)
        sent[md.partition].append(value)
        if md.offset >= 0:
            assert leader.logs[md.partition][md.offset] == value
    assert leader.lost_answers > 0  # the faults did happen
    for p in range(PARTITIONS):
        assert leader.logs[p] == sent[p]  # no duplicates, no losses, send order kept


def test_without_faults_offsets_are_exact() -> None:
    leader = FakeLeader(0, faults=False)
    with Producer("http://fake", transport=httpx.MockTransport(leader.handle)) as producer:
        futures = [producer.send("t", b"v%d" % i, partition=i % 2) for i in range(50)]
        producer.flush()
    for i, f in enumerate(futures):
        md = f.result()
        assert md.partition == i % 2 and md.offset == i // 2


def test_non_retriable_errors_reach_the_future_and_callback() -> None:
    async def refuse(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/topics/t/records":
            return httpx.Response(
                413, json={"error_code": "MESSAGE_TOO_LARGE", "message": "too big"}
            )
        return await FakeLeader(0, faults=False).handle(request)

    seen: list[BaseException | None] = []
    with Producer("http://fake", transport=httpx.MockTransport(refuse)) as producer:
        future = producer.send("t", b"x", callback=lambda md, err: seen.append(err))
        with pytest.raises(ApiError, match="MESSAGE_TOO_LARGE"):
            future.result(10)
    assert len(seen) == 1 and isinstance(seen[0], ApiError)


def test_unknown_topic_is_reported_by_send() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            404, json={"error_code": "UNKNOWN_TOPIC_OR_PARTITION", "message": "no such topic"}
        )

    with (
        Producer("http://fake", transport=httpx.MockTransport(handler)) as producer,
        pytest.raises(ApiError, match="UNKNOWN_TOPIC_OR_PARTITION"),
    ):
        producer.send("missing", b"x")


def test_a_leader_has_at_most_max_in_flight_requests_shared_by_its_partitions() -> None:
    leader = FakeLeader(0, faults=False)
    in_flight: list[int] = [0]
    peak: list[int] = [0]
    started: list[int] = []  # the partition of each request, in the order they went out
    # No answer before every record is queued: on a loaded machine the sender otherwise
    # drains a partition before the test thread has queued the rest of its records, and the
    # order of the requests would show the test's pace, not the producer's turn-taking.
    queued = threading.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/topics/t/records":
            return await leader.handle(request)
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        table = pa.ipc.open_stream(request.content).read_all()
        started.append(table.column("partition")[0].as_py())
        try:
            while not queued.is_set():
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.01)  # answers come late: requests pile up if allowed
            return await leader.handle(request)
        finally:
            in_flight[0] -= 1

    with Producer(
        "http://fake", transport=httpx.MockTransport(slow), batch_size=200, max_in_flight=3
    ) as producer:
        futures = [producer.send("t", b"v" * 50, partition=i % PARTITIONS) for i in range(300)]
        queued.set()
        producer.flush(60)
    assert all(f.result(0).offset >= 0 for f in futures)
    assert peak[0] == 3  # the pipeline is kept full, never past the leader's limit
    # The partitions took turns for the slots: none waited for another's whole backlog.
    first = started[: 3 * PARTITIONS]
    assert all(first.count(p) >= 2 for p in range(PARTITIONS)), started


@pytest.mark.parametrize("seed", [4, 5])
def test_small_send_table_calls_ride_together_through_faults(seed: int) -> None:
    leader = FakeLeader(seed, faults=True)
    sizes: list[int] = []

    async def counted(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/topics/t/records":
            sizes.append(pa.ipc.open_stream(request.content).read_all().num_rows)
        return await leader.handle(request)

    producer = Producer(
        "http://fake",
        transport=httpx.MockTransport(counted),
        max_in_flight=1,
        # Requests of a few calls' records: enough of them that faults surely strike.
        batch_size=1000,
        max_request_size=1000,
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
    )
    deliveries, values = [], []
    try:
        for call in range(40):  # 40 calls of 30 records: 10 per partition and call
            vals = [b"c%d-r%d" % (call, i) for i in range(30)]
            table = pa.table({"value": vals, "partition": [i % PARTITIONS for i in range(30)]})
            deliveries.append(producer.send_table("t", table))
            values.append(vals)
        producer.flush(60)
    finally:
        producer.close(10)
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for delivery, vals in zip(deliveries, values, strict=True):
        for md, value in zip(delivery.result(0), vals, strict=True):
            sent[md.partition].append(value)
            if md.offset >= 0:
                assert leader.logs[md.partition][md.offset] == value
    assert leader.lost_answers > 0
    for p in range(PARTITIONS):
        assert leader.logs[p] == sent[p]  # once each, in call order
    assert max(sizes) > 10  # calls waiting for the one slot went out together
