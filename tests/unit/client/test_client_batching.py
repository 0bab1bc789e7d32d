"""The accumulator: batches close at batch_size, become ready after linger_ms or on flush,
respect per-partition send limits, bound memory and expire; and their Arrow encoding."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from logformat.records import normalize_arrow, read_arrow_stream
from tierlog.client.accumulator import RecordAccumulator
from tierlog.client.batch import ProducerBatch, encode_records, record_size
from tierlog.client.delivery import RecordFuture
from tierlog.client.errors import ClientClosedError, ClientTimeoutError
from tierlog.client.types import TopicPartition

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def make(**kw: object) -> tuple[RecordAccumulator, list[TopicPartition], list[int]]:
    closed: list[TopicPartition] = []
    wakes: list[int] = []
    args: dict[str, object] = {
        "batch_size": 1000,
        "linger_ms": 50,
        "buffer_memory": 1 << 20,
        "delivery_timeout_ms": 60_000,
    }
    args.update(kw)
    acc = RecordAccumulator(
        on_batch_closed=closed.append,
        wake_sender=lambda: wakes.append(1),
        **args,  # type: ignore[arg-type]
    )
    return acc, closed, wakes


def append(acc: RecordAccumulator, tp: TopicPartition, value: bytes) -> None:
    acc.append(tp, None, value, None, 1, max_block_s=1)


def everything(batch: ProducerBatch) -> bool:
    return True


def test_batches_close_at_batch_size() -> None:
    acc, closed, _ = make()
    size = record_size(None, b"x" * 80, None)  # 100 bytes each
    for _ in range(25):
        append(acc, TP, b"x" * 80)
    # Nothing lingered yet, but the full batches are ready at once.
    ready = acc.ready(time.monotonic(), everything)
    assert [b.record_count for b in ready] == [1000 // size] * 2
    assert all(b.size <= 1000 for b in ready)
    assert closed == [TP, TP]  # the sticky partitioner hears of each closed batch
    # The open third batch becomes ready after linger_ms.
    assert acc.ready(time.monotonic(), everything) == []
    later = acc.ready(time.monotonic() + 0.06, everything)
    assert [b.record_count for b in later] == [5]
    assert closed == [TP, TP, TP]


def test_a_record_larger_than_batch_size_gets_its_own_batch() -> None:
    acc, _, _ = make(batch_size=100)
    append(acc, TP, b"a")
    append(acc, TP, b"b" * 500)
    append(acc, TP, b"c")
    ready = acc.ready(time.monotonic() + 1, everything)
    assert [b.values for b in ready] == [[b"a"], [b"b" * 500], [b"c"]]


def test_flush_makes_open_batches_ready_and_limits_hold() -> None:
    acc, _, wakes = make(linger_ms=60_000)
    for i in range(3):
        append(acc, TP, b"%d" % i)
        append(acc, TP1, b"%d" % i)
    assert wakes  # a new batch wakes the sender so it can time the linger
    assert acc.ready(time.monotonic(), everything) == []
    acc.begin_flush()
    # TP may send nothing now (its in-flight limit is reached): only TP1's batch goes.
    ready = acc.ready(time.monotonic(), lambda b: b.tp != TP)
    assert [b.tp for b in ready] == [TP1]
    assert [b.tp for b in acc.ready(time.monotonic(), everything)] == [TP]
    acc.end_flush()


def test_a_caller_waiting_on_a_future_ends_the_linger_of_what_is_queued() -> None:
    acc, _, wakes = make(linger_ms=60_000)
    futures = [acc.append(tp, None, b"x", None, 1, max_block_s=1) for tp in (TP, TP1)]
    assert acc.ready(time.monotonic(), everything) == []  # lingering, a minute
    wakes.clear()
    waiter = threading.Thread(target=lambda: futures[0].exception(5))
    waiter.start()
    deadline = time.monotonic() + 5
    while not wakes and time.monotonic() < deadline:
        time.sleep(0.001)
    assert wakes  # the sender is woken at once ...
    # ... and takes both partitions' batches: the waiter blocks on one, the round is both.
    ready = acc.ready(time.monotonic(), everything)
    assert sorted(b.tp.partition for b in ready) == [0, 1]
    # A batch started after the wait began lingers as usual.
    append(acc, TP, b"later")
    assert acc.ready(time.monotonic(), everything) == []
    for b in ready:
        b.complete(0)
    waiter.join(5)
    assert not waiter.is_alive()


def test_memory_bound_blocks_then_times_out_and_release_frees_it() -> None:
    acc, _, _ = make(buffer_memory=300, batch_size=100)
    for _ in range(3):
        append(acc, TP, b"x" * 80)
    with pytest.raises(ClientTimeoutError):
        acc.append(TP, None, b"x" * 80, None, 1, max_block_s=0.05)
    (first, *_rest) = acc.ready(time.monotonic(), everything)

    def release_soon() -> None:
        time.sleep(0.1)
        first.complete(0)
        acc.release(first)

    t = threading.Thread(target=release_soon)
    t.start()
    acc.append(TP, None, b"x" * 80, None, 1, max_block_s=5)  # unblocks on release
    t.join()


def test_expired_batches_are_taken_out_and_close_refuses_appends() -> None:
    acc, _, _ = make(delivery_timeout_ms=10)
    append(acc, TP, b"old")
    assert acc.expired(time.monotonic()) == []
    [batch] = acc.expired(time.monotonic() + 1)
    assert batch.values == [b"old"]
    acc.close()
    with pytest.raises(ClientClosedError):
        append(acc, TP, b"late")


def test_batch_futures_get_consecutive_offsets() -> None:
    batch = ProducerBatch(TP, deadline=time.monotonic() + 10)
    indexes = [batch.try_append(None, b"v", None, 100 + i, 10, 1000) for i in range(3)]
    futures = [RecordFuture(batch, i) for i in indexes]
    seen: list[object] = []
    futures[0].add_done_callback(lambda f: seen.append(f.result().offset))
    assert not futures[1].done() and seen == []
    batch.complete(40)
    assert [f.result() for f in futures] == [
        (TP.topic, 0, 40, 100),
        (TP.topic, 0, 41, 101),
        (TP.topic, 0, 42, 102),
    ]
    assert batch.done.is_set() and seen == [40]
    futures[2].add_done_callback(lambda f: seen.append(f.result().offset))  # done: at once
    assert seen == [40, 42]


def test_a_failed_batch_fails_each_record_with_its_error() -> None:
    batch = ProducerBatch(TP, deadline=time.monotonic() + 10)
    futures = [RecordFuture(batch, batch.try_append(None, b"v", None, 1, 10, 1000)) for _ in "ab"]
    with pytest.raises(TimeoutError):
        futures[0].result(timeout=0.01)
    batch.fail(ClientClosedError("producer"))
    assert all(isinstance(f.exception(), ClientClosedError) for f in futures)
    with pytest.raises(ClientClosedError):
        futures[1].result()
    assert not futures[0].cancel() and not futures[0].cancelled()


@pytest.mark.parametrize("compression", [None, "zstd", "lz4"])
def test_encoding_is_what_the_broker_reads_byte_for_byte(compression: str | None) -> None:
    keys = [None, b"k\x00\xff", b""]
    values = [b"\x00\x01binary\xfe", None, b"x" * 1000]
    headers: list[list[tuple[str, bytes | None]] | None] = [
        None,
        [("h", b"\x00"), ("h", None)],
        [("trace", b"abc")],
    ]
    body = encode_records(keys, values, headers, [5, 6, 7], 3, compression)
    norm = normalize_arrow(read_arrow_stream(body), now_ms=0)
    batch = norm.batch
    assert batch.column("key").to_pylist() == keys
    assert batch.column("value").to_pylist() == values
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [5, 6, 7]
    assert norm.partitions is not None and norm.partitions.to_pylist() == [3, 3, 3]
    got = batch.column("headers").to_pylist()
    assert got[0] is None
    assert got[1] == [{"key": "h", "value": b"\x00"}, {"key": "h", "value": None}]
