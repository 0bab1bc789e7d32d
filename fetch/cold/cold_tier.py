"""The cold tier as a reader: fetch's implementation of cluster.read_contract.ColdReader, used
by brokers (for offsets below their local log start) and by fetch nodes.

It owns the caches, the prefetcher and two small thread pools: one for Parquet decoding,
one for manifest queries. Neither is the event loop's default executor, so cold reads can
neither block the loop nor starve a broker's own background work (heartbeats, appends).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar

import pyarrow as pa
from botocore.exceptions import BotoCoreError, ClientError

from cluster import node_settings as node
from cluster.notify_hub import NotifyHub
from cluster.read_contract import ColdRange, ColdRead
from cluster.search_contract import ColdSearchPlan, FileHits, SearchQuery
from failures.classify import family
from failures.families import Family, StorageError, UnavailableError
from fetch.cold import metrics
from fetch.cold.cold_caches import ColdCaches
from fetch.cold.cold_index import ColdIndex, ManifestQueries
from fetch.cold.cold_offsets import offset_for_timestamp
from fetch.cold.cold_reader import ColdFileReader, ReadLimits
from fetch.cold.cold_search import ColdSearch
from fetch.cold.deadlines import DeadlineStore
from fetch.cold.footer_cache import FooterCache
from fetch.cold.parquet_layout import CorruptColdFileError
from fetch.cold.prefetch import PrefetchConfig, Prefetcher
from fetch.cold.range_cache import RangeCache, ShortReadError
from fetch.cold.row_groups import RowGroupCache
from fetch.cold.store import RangeStore
from fetch.cold.typed_read import TypedColumnReader
from logformat.errors import ErrorCode, TierlogError
from metadata.db import make_engine
from metadata.db_errors import POSTGRES_DOWN
from metadata.erasures import ERASURES_CHANNEL, READER_LISTEN_KEEPALIVE_S
from metadata.types import ColdFile, TopicIdPartition

log = logging.getLogger("tierlog.fetch.cold")
MiB = 1 << 20
DECODE_NICE = 10
T = TypeVar("T")
# What a broken object store or a corrupt object raises (pyarrow: undecodable Parquet).
_STORE_ERRORS = (
    OSError,
    BotoCoreError,
    ClientError,
    CorruptColdFileError,
    ShortReadError,
    pa.ArrowException,
    *POSTGRES_DOWN,  # the manifest (Postgres) is away
)


class ColdTierConfig(NamedTuple):
    """Defaults: the settings table's (cluster/node_settings.py, TIERLOG_COLD_*)."""

    cache_bytes: int = node.COLD_CACHE_MB.default * MiB  # raw ranges: the memory bound
    decoded_bytes: int = node.COLD_DECODED_MB.default * MiB  # decoded row groups
    decode_threads: int = node.COLD_DECODE_THREADS.default
    db_threads: int = 2
    prefetch: PrefetchConfig = PrefetchConfig()
    manifest_timeout_s: float = node.COLD_MANIFEST_TIMEOUT_MS.default / 1000  # Postgres
    s3_timeout_s: float = node.COLD_S3_TIMEOUT_MS.default / 1000  # one ranged GET, retries too


class ColdTier:
    """Everything cold runs on an event loop of its own, in a thread of its own (at a lower
    priority): receiving megabytes from S3 and joining them into objects is event-loop work
    that must not queue a broker's produce requests behind it. Callers on any loop get the
    results through futures."""

    def __init__(
        self,
        database_url: str,
        store: RangeStore,
        config: ColdTierConfig | None = None,
        notices: NotifyHub | None = None,
    ) -> None:
        """`notices`: the node's LISTEN connection (a private one if None)."""
        if notices is not None and notices.keepalive_s > READER_LISTEN_KEEPALIVE_S:
            raise ValueError("the cold reader's LISTEN connection must notice a loss in time")
        self.config = config = config or ColdTierConfig()
        self._store = store = DeadlineStore(store, config.s3_timeout_s)
        self._engine = make_engine(database_url, pool_size=config.db_threads, max_overflow=0)
        self._db_pool = ThreadPoolExecutor(config.db_threads, thread_name_prefix="cold-db")
        self._decode_pool = ThreadPoolExecutor(
            config.decode_threads, thread_name_prefix="cold-decode", initializer=_lower_priority
        )
        # An erasure's cold rewrite is announced on ERASURES_CHANNEL: cached file lists go
        # at once, and are trusted only while the listener holds (metadata/erasures.py).
        hub = notices or NotifyHub(database_url, READER_LISTEN_KEEPALIVE_S)
        self._listener = hub.subscribe(ERASURES_CHANNEL, self._files_changed)
        self.index = ColdIndex(
            ManifestQueries(self._engine),
            self._db_pool,
            query_timeout_s=config.manifest_timeout_s,
            listening=self._listener.connected.is_set,
        )
        self._refreshing: set[TopicIdPartition] = set()  # bounds being re-read (cold loop only)
        self.ranges = RangeCache(store, config.cache_bytes)
        self.footers = FooterCache(self.ranges, self._decode_pool)
        self.groups = RowGroupCache(self.ranges, self._decode_pool, config.decoded_bytes)
        self.caches = ColdCaches(self.index, self.footers, self.ranges, self.groups)
        self.reader = ColdFileReader(self.caches, self._decode_pool)
        self.prefetcher = Prefetcher(self.caches, config.prefetch)
        self.searcher = ColdSearch(self.index, self.footers, store, self._decode_pool)
        self.typed = TypedColumnReader(self.index, self.footers, store, self._decode_pool)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="cold-io", daemon=True)

    def _run_loop(self) -> None:
        _lower_priority()
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the cold loop; cancelling the caller cancels it there too."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def _files_changed(self) -> None:
        self.index.invalidate_all()

    async def start(self) -> None:
        self._thread.start()
        self._listener.start()
        await self._on_loop(self._store.open())

    async def close(self) -> None:
        self._listener.stop()
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                await self._on_loop(self._close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            await asyncio.to_thread(self._thread.join, 5)
        self._decode_pool.shutdown(wait=False, cancel_futures=True)
        self._db_pool.shutdown(wait=False, cancel_futures=True)
        self._engine.dispose()

    async def _close(self) -> None:
        await self.prefetcher.close()
        await self._store.close()

    # The ColdReader methods (cluster/read_contract.py) take a partition as (topic_id,
    # partition); inside, it is one TopicIdPartition.

    async def cold_range(
        self, topic_id: str, partition: int, fresh: bool = False
    ) -> ColdRange | None:
        tp = TopicIdPartition(topic_id, partition)
        if not fresh:
            hit = self.index.peek_bounds(tp)  # every hot fetch asks: no hop
            if hit is not None:
                return hit[0]
        try:
            return await self._on_loop(self.index.bounds(tp, fresh))
        except POSTGRES_DOWN as exc:
            raise _unavailable("the cold manifest cannot be read", exc) from exc
        except TierlogError:
            raise
        except Exception as exc:
            raise _unavailable("the cold manifest cannot be read", exc) from exc

    def known_range(self, topic_id: str, partition: int) -> tuple[ColdRange | None] | None:
        """The last cold range read, without waiting (hot reads must not wait on Postgres);
        a stale or missing one is re-read in the background for the next caller."""
        tp = TopicIdPartition(topic_id, partition)
        hit = self.index.last_bounds(tp)
        if (hit is None or hit[0] >= self.index.bounds_ttl_s) and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._refresh_bounds, tp)
        return None if hit is None else (hit[1],)

    def _refresh_bounds(self, tp: TopicIdPartition) -> None:
        if tp in self._refreshing:  # one query per partition at a time, however many ask
            return
        self._refreshing.add(tp)
        task = asyncio.ensure_future(self.index.bounds(tp, fresh=True))

        def done(t: asyncio.Future[ColdRange | None]) -> None:
            self._refreshing.discard(tp)
            if not t.cancelled() and t.exception() is not None:
                log.debug("cold bounds refresh failed", exc_info=t.exception())

        task.add_done_callback(done)

    async def read(
        self,
        topic: str,
        topic_id: str,
        partition: int,
        offset: int,
        end: int,
        max_records: int,
        max_bytes: int,
    ) -> ColdRead:
        tp = TopicIdPartition(topic_id, partition)
        limits = ReadLimits(end, max_records, max_bytes)
        return await self._on_loop(self._read(topic, tp, offset, limits))

    async def _read(
        self, topic: str, tp: TopicIdPartition, offset: int, limits: ReadLimits
    ) -> ColdRead:
        end = limits.end
        for attempt in (1, 2):
            try:
                got, where = await self.reader.read(tp, offset, limits)
            except KeyError as exc:  # an object is gone: compaction replaced the file
                self._forget(tp, exc)
                if attempt == 2:
                    raise _unavailable(f"cold file {exc} is missing", exc) from exc
                continue
            except _STORE_ERRORS as exc:
                raise _unavailable("reading the cold tier failed", exc) from exc
            if got.next_offset <= offset and offset < end:  # no file where the range said
                self.index.invalidate(tp)
                if attempt == 2:
                    raise TierlogError(
                        ErrorCode.KAFKA_STORAGE_ERROR,
                        f"offset {offset} of {topic}-{tp.partition} is in no committed cold file "
                        "any more (retention or compaction moved it); retry",
                    )
                continue
            metrics.COLD_FETCHES.inc()
            metrics.COLD_RECORDS.labels(topic).inc(got.batch.num_rows)
            self.prefetcher.after_read(tp, offset, got.next_offset, where, got.batch.num_rows)
            return got
        raise AssertionError("unreachable")

    async def offset_for_timestamp(
        self, topic: str, topic_id: str, partition: int, timestamp: int
    ) -> int | None:
        tp = TopicIdPartition(topic_id, partition)
        return await self._on_loop(self._offset_for_timestamp(tp, timestamp))

    async def _offset_for_timestamp(self, tp: TopicIdPartition, timestamp: int) -> int | None:
        try:
            return await offset_for_timestamp(self.caches, tp, timestamp)
        except KeyError as exc:
            self._forget(tp, exc)
            raise _unavailable(f"cold file {exc} is missing", exc) from exc
        except _STORE_ERRORS as exc:
            raise _unavailable("reading the cold tier failed", exc) from exc

    async def read_columns(
        self, topic_id: str, partition: int, first: int, last: int, columns: tuple[str, ...]
    ) -> pa.Table:
        """`offset` and the typed `columns` of cold rows first..last (fetch/typed_answers.py)."""
        tp = TopicIdPartition(topic_id, partition)
        try:
            return await self._on_loop(self.typed.read(tp, first, last, columns))
        except KeyError as exc:
            self._forget(tp, exc)
            raise _unavailable(f"cold file {exc} is missing", exc) from exc
        except _STORE_ERRORS as exc:
            raise _unavailable("reading the cold tier failed", exc) from exc

    # The ColdSearcher methods (cluster/search_contract.py).

    async def search_plan(
        self, topic_id: str, partition: int, query: SearchQuery
    ) -> ColdSearchPlan:
        tp = TopicIdPartition(topic_id, partition)
        try:
            return await self._on_loop(self.searcher.plan(tp, query))
        except POSTGRES_DOWN as exc:
            raise _unavailable("the cold manifest cannot be read", exc) from exc
        except TierlogError:
            raise
        except Exception as exc:
            raise _unavailable("the cold manifest cannot be read", exc) from exc

    async def search_file(self, file: ColdFile, query: SearchQuery, max_hits: int) -> FileHits:
        try:
            return await self._on_loop(self.searcher.scan_file(file, query, max_hits))
        except KeyError as exc:
            self._forget(TopicIdPartition(file.topic_id, file.partition), exc)
            raise TierlogError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"cold file {file.object_key} is gone (compaction or retention replaced it); "
                "search again",
            ) from None
        except _STORE_ERRORS as exc:
            raise _unavailable("reading the cold tier failed", exc) from exc

    def _forget(self, tp: TopicIdPartition, exc: KeyError) -> None:
        self.index.invalidate(tp)
        if exc.args and isinstance(exc.args[0], str):
            self.ranges.forget(exc.args[0])


def _lower_priority() -> None:
    """Cold reads are throughput work: on a host they share with a broker, the produce path
    (latency work, on the broker's event loop) gets the CPU first. Linux nice values are per thread;
    raising one's own needs no privilege. Elsewhere this is a no-op."""
    with contextlib.suppress(AttributeError, OSError):
        tid = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, now + DECODE_NICE))


def _unavailable(what: str, exc: BaseException) -> TierlogError:
    """The cold tier's adapter: S3 or Postgres away is an outage, a corrupt object a storage
    error (both retriable: another read may succeed); the client sees KAFKA_STORAGE_ERROR."""
    log.warning("cold read failed: %s: %r", what, exc)
    if family(exc) in (Family.UNAVAILABLE, Family.THROTTLED):
        dependency = "Postgres" if isinstance(exc, POSTGRES_DOWN) else "S3"
        return UnavailableError(dependency, f"{what}: {exc}", ErrorCode.KAFKA_STORAGE_ERROR)
    return StorageError(f"{what}: {exc}")
