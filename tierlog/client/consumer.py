"""The Consumer: Kafka's consumer API over tierlog's HTTP fetch and groups (docs/design.md §1, §5).

    consumer = Consumer("http://127.0.0.1:8080", group_id="billing", auto_offset_reset="earliest")
    consumer.subscribe(["payments"], listener=MyListener())
    while True:
        for record in consumer.poll(1.0):
            handle(record)          # ConsumerRecord(topic, partition, offset, timestamp, ...)

With a group_id, subscribe() joins the group (server-side assignment, KIP-848) and commits go
to it; without one, assign() names partitions directly. poll() returns records in offset order
per partition, never beyond the high watermark, fetched with long-polls on a background I/O
thread, which also heartbeats. Not thread-safe, like Kafka's: use it from one thread.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from itertools import chain
from typing import Any

import httpx
import pyarrow as pa

from tierlog.client.buffer import RecordBuffer, RowSlice
from tierlog.client.commits import CommitCallback, Committer, OffsetsArg
from tierlog.client.config import ConsumerConfig
from tierlog.client.consumer_records import ARROW_RECORDS_SCHEMA, ConsumerRecord
from tierlog.client.errors import ApiError, ClientClosedError
from tierlog.client.fetch_collector import FetchCollector
from tierlog.client.fetcher import Fetcher
from tierlog.client.group import GroupMember
from tierlog.client.lifecycle import ClientBase
from tierlog.client.metadata import ClusterMetadata
from tierlog.client.positions import Positions
from tierlog.client.rebalance import ConsumerRebalanceListener, Reconciler
from tierlog.client.subscription import Mode, SubscriptionState
from tierlog.client.types import (
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

log = logging.getLogger("tierlog.client.consumer")

_IDLE_S = 0.05  # how long poll() naps when it has nothing to wait on (no assignment yet)
_ALL = 1 << 62  # poll_batch()'s default limit: whatever is buffered


class Consumer(ClientBase):
    def __init__(
        self,
        bootstrap: str | Sequence[str] = "http://127.0.0.1:8080",
        *,
        group_id: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        verify: bool | str = True,
        **config: Any,
    ) -> None:
        """`config`: ConsumerConfig's fields (auto_offset_reset, enable_auto_commit,
        auto_commit_interval_ms, fetch_max_wait_ms, max_poll_records, session_timeout_ms,
        group_assignor, ...). `api_key` (default $TIERLOG_API_KEY) authenticates; `verify`
        is a CA bundle path or a bool."""
        self.config = ConsumerConfig(group_id=group_id, **config)
        cfg = self.config
        timeout_s = cfg.request_timeout_ms / 1000
        self._open_io(
            "tierlog-consumer-io",
            bootstrap,
            timeout_s=timeout_s,
            transport=transport,
            max_connections=cfg.max_concurrent_fetches + 8,  # room for heartbeats and commits
            api_key=api_key,
            verify=verify,
        )
        self._metadata = ClusterMetadata(
            self._http, max_age_ms=cfg.metadata_max_age_ms, timeout_s=timeout_s
        )
        self._fetcher = Fetcher(
            self._http,
            self._metadata,
            self._io,
            max_wait_ms=cfg.fetch_max_wait_ms,
            max_bytes=cfg.max_partition_fetch_bytes,
            max_records=max(cfg.max_poll_records, 5000),
            max_concurrent=cfg.max_concurrent_fetches,
            timeout_s=timeout_s,
        )
        self._subscription = SubscriptionState()
        self._buffer = RecordBuffer()
        self._member = GroupMember(self._http, group_id, cfg) if group_id else None
        self._reconciler = (
            Reconciler(self._member, self._subscription, self._buffer, self._commit_revoked)
            if self._member
            else None
        )
        self._positions = Positions(
            self._io,
            self._http,
            self._metadata,
            self._subscription,
            self._member,
            default_reset=cfg.auto_offset_reset,
            timeout_s=timeout_s,
        )
        self._joining: Future[None] | None = None
        self._collector = FetchCollector(
            self._subscription,
            self._buffer,
            auto_offset_reset=cfg.auto_offset_reset,
            retry_backoff_s=cfg.retry_backoff_ms / 1000,
        )
        self._committer = (
            Committer(
                self._io,
                self._member,
                self._subscription,
                auto=cfg.enable_auto_commit,
                interval_ms=cfg.auto_commit_interval_ms,
                timeout_s=timeout_s,
            )
            if self._member
            else None
        )
        self._closed = False

    # --- what to read ---
    def subscribe(
        self, topics: str | Iterable[str], listener: ConsumerRebalanceListener | None = None
    ) -> None:
        if self._member is None or self._reconciler is None:
            raise ValueError("subscribe() needs a group_id; without one use assign()")
        names = [topics] if isinstance(topics, str) else list(topics)
        self._subscription.subscribe(names)
        if self._member.joined and self._member.new_topics != self._subscription.topics:
            # The next heartbeat tells the group; partitions of dropped topics go at once.
            self._member.new_topics = self._subscription.topics
            self._io.call_soon(self._member.wake)
        self._reconciler.listener = listener

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        wanted = [TopicPartition(*tp) for tp in partitions]
        before = self._subscription.assigned
        self._subscription.assign(wanted)
        self._buffer.drop([tp for tp in before if tp not in wanted])

    def unsubscribe(self) -> None:
        self._leave_group()
        self._subscription.unsubscribe()
        self._buffer.drop()

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscription.assigned)

    def subscription(self) -> set[str]:
        return (
            set(self._subscription.topics) if self._subscription.mode is Mode.SUBSCRIBED else set()
        )

    # --- reading ---
    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to `timeout` seconds for some."""
        limit = max_records or self.config.max_poll_records
        return list(
            chain.from_iterable(s.rows.records(s.start, s.end) for s in self._take(timeout, limit))
        )

    def poll_batch(
        self, timeout: float = 1.0, max_records: int | None = None
    ) -> list[pa.RecordBatch]:
        """As poll(), as Arrow record batches (ARROW_RECORDS_SCHEMA: topic, partition, offset,
        timestamp, key, value, headers), each of one partition in offset order. Takes up to
        `max_records` records (default: all buffered, at most two fetches per partition)."""
        return [s.rows.batch(s.start, s.end) for s in self._take(timeout, max_records or _ALL)]

    def poll_arrow(self, timeout: float = 1.0, max_records: int | None = None) -> pa.Table:
        """poll_batch()'s batches as one table (no copy): for pandas, DuckDB, Polars."""
        batches = self.poll_batch(timeout, max_records)
        return pa.Table.from_batches(batches, schema=ARROW_RECORDS_SCHEMA)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while not self._closed:
            yield from self.poll(1.0)

    def _take(self, timeout: float, limit: int) -> list[RowSlice]:
        self._check_open()
        if self._subscription.mode is Mode.NONE:
            raise ValueError("poll() before subscribe() or assign()")
        if limit <= 0:
            raise ValueError(f"max_records must be positive, got {limit}")
        deadline = time.monotonic() + max(0.0, timeout)
        if self._member is not None:
            self._member.last_poll = time.monotonic()
        while True:
            self._prepare(deadline)
            self._collect()
            taken = self._buffer.take(self._subscription, limit)
            self._fetcher.send(self._collector.requests(), self.config.fetch_max_wait_ms / 1000)
            left = deadline - time.monotonic()
            if taken or left <= 0:
                return taken
            self._await_fetch(left)

    def _prepare(self, deadline: float) -> None:
        """Commits due, group duties, and positions for partitions that have none."""
        if self._committer is not None:
            self._committer.fire_callbacks()
            self._committer.maybe_auto_commit()
        try:
            if self._member is not None and self._subscription.mode is Mode.SUBSCRIBED:
                self._coordinate(deadline)
            self._positions.resolve()
        except ApiError as exc:
            if not exc.retriable:
                raise
            log.info("poll: %s (retrying)", exc)
            time.sleep(
                min(self.config.retry_backoff_ms / 1000, max(0.0, deadline - time.monotonic()))
            )

    def _collect(self) -> None:
        for result in self._fetcher.arrived():
            self._collector.collect(result)

    def _await_fetch(self, left: float) -> None:
        if not self._fetcher.in_flight():
            time.sleep(min(left, _IDLE_S))  # e.g. waiting for the group to assign partitions
            return
        # A group member comes back at least every heartbeat interval to reconcile.
        self._fetcher.wait(left if self._member is None else min(left, self._member.interval_s))

    # --- group membership ---
    def _coordinate(self, deadline: float) -> None:
        member, reconciler = self._member, self._reconciler
        assert member is not None and reconciler is not None
        reconciler.handle_lost()
        if not member.joined:
            if self._joining is None:
                self._joining = self._io.submit(member.join(self._subscription.topics))
            # The join carries on in the background if this poll's time runs out.
            with contextlib.suppress(TimeoutError):
                self._joining.exception(max(0.0, deadline - time.monotonic()))
            if not self._joining.done():
                return
            joining, self._joining = self._joining, None
            joining.result()  # raises the join's error
        if reconciler.reconcile():
            self._io.call_soon(member.wake)

    def _leave_group(self) -> None:
        member, reconciler = self._member, self._reconciler
        if member is None or reconciler is None:
            return
        if self._joining is not None:
            with contextlib.suppress(Exception):
                self._joining.result(self.config.request_timeout_ms / 1000)
            self._joining = None
        owned = set(self._subscription.assigned)
        if member.joined and owned:
            with contextlib.suppress(Exception):
                self._commit_revoked(owned)
            if reconciler.listener is not None:
                reconciler.listener.on_partitions_revoked(owned)
        self._subscription.remove(owned)
        self._buffer.drop(owned)
        self._io.run(member.leave())

    def _commit_revoked(self, partitions: set[TopicPartition]) -> None:
        if self._committer is not None:
            self._committer.commit_partitions(partitions)

    # --- positions ---
    def seek(self, partition: TopicPartition, offset: int) -> None:
        tp = TopicPartition(*partition)
        self._subscription.seek(tp, offset)
        self._buffer.drop([tp])

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._reset_to(partitions, "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._reset_to(partitions, "latest")

    def _reset_to(self, partitions: Sequence[TopicPartition], strategy: str) -> None:
        tps = [TopicPartition(*tp) for tp in partitions] or self._subscription.assigned
        for tp in tps:
            self._subscription.request_reset(tp, strategy)
        self._buffer.drop(tps)

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record poll() returns for `partition` (looked up if needed)."""
        tp = TopicPartition(*partition)
        if self._subscription.state(tp).position is None:
            self._positions.resolve()
        position = self._subscription.state(tp).position
        assert position is not None
        return position

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark seen by the last fetch of `partition`."""
        return self._subscription.state(TopicPartition(*partition)).high_watermark

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        return self._positions.list([TopicPartition(*tp) for tp in partitions], "earliest")

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The high watermarks: consumers can read up to (not including) these."""
        return self._positions.list([TopicPartition(*tp) for tp in partitions], "latest")

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the first record with a timestamp >= the given one (ms), or None."""
        return self._positions.for_times(timestamps)

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subscription.state(TopicPartition(*tp)).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subscription.state(TopicPartition(*tp)).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp in self._subscription.assigned if self._subscription.state(tp).paused}

    def partitions_for(self, topic: str) -> set[int]:
        meta = self._io.run(self._metadata.topic(topic))
        return {p.partition for p in meta.partitions}

    # --- commits ---
    def _group_committer(self) -> Committer:
        if self._committer is None:
            raise ValueError("offset commits need a group_id")
        return self._committer

    def commit(self, offsets: OffsetsArg = None) -> None:
        """Commit `offsets` (default: the positions of everything poll() returned) and wait."""
        self._check_open()
        committer = self._group_committer()
        committer.fire_callbacks()
        committer.commit(offsets)

    def commit_async(
        self, offsets: OffsetsArg = None, callback: CommitCallback | None = None
    ) -> Future[None]:
        """Commit without waiting; `callback(offsets, error)` runs in a later poll() (or
        commit(), close()), in the order the commits were made."""
        self._check_open()
        return self._group_committer().commit_async(offsets, callback)

    def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        if self._member is None:
            raise ValueError("committed offsets need a group_id")
        return self._io.run(self._member.committed([TopicPartition(*tp) for tp in partitions]))

    # --- lifecycle ---
    def close(self, autocommit: bool = True) -> None:
        """Commit (if auto-commit is on), leave the group and stop."""
        if self._closed:
            return
        try:
            committer = self._committer
            if committer is not None and self._subscription.mode is not Mode.NONE:
                committer.auto = committer.auto and autocommit
                if self._subscription.mode is Mode.SUBSCRIBED:
                    self._leave_group()
                elif committer.auto and self._subscription.positions():
                    with contextlib.suppress(Exception):
                        committer.commit()
            if committer is not None:
                committer.fire_callbacks(wait=True)
        finally:
            self._closed = True
            with contextlib.suppress(Exception):
                self._io.run(self._fetcher.close(), 5)
            self._close_io()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("consumer")
