"""The broker process: metadata, hosted partitions, background duties, and the HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator

import uvicorn

from ingest import metrics
from ingest.broker_config import BrokerConfig
from ingest.log_manager import LogManager
from ingest.metadata_cache import MetadataCache, TopicView
from ingest.partition_log import LogConfig
from ingest.partition_state import PartitionState
from logformat.errors import ErrorCode, TierlogError
from logformat.partitioner import StickyPartitioner
from metadata.brokers import BrokerRepo
from metadata.db import make_engine, migrate
from metadata.topics import TopicRepo

log = logging.getLogger("tierlog.broker")


def log_config(view: TopicView) -> LogConfig:
    return LogConfig(segment_bytes=view.config.segment_bytes, segment_ms=view.config.segment_ms)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.engine = make_engine(config.database_url)
        self.brokers = BrokerRepo(self.engine)
        self.topics = TopicRepo(self.engine)
        self.cache = MetadataCache(self.topics)
        self.logs: LogManager | None = None
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.sticky: dict[str, StickyPartitioner] = {}
        self.ready = False
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(migrate, self.engine)
        await asyncio.to_thread(
            self.brokers.register, cfg.broker_id, cfg.advertised_url, cfg.lease_ms
        )
        self.logs = await asyncio.to_thread(LogManager, str(cfg.data_dir))
        await asyncio.to_thread(self.cache.refresh, True)
        self.reconcile()
        self._tasks = [
            asyncio.create_task(self._every(cfg.heartbeat_ms, self._heartbeat), name="heartbeat"),
            asyncio.create_task(
                self._every(cfg.metadata_refresh_ms, self._refresh), name="refresh"
            ),
            asyncio.create_task(self._every(1000, self._roll), name="segment-roll"),
        ]
        self.ready = True
        log.info(
            "broker started",
            extra={
                "broker_id": cfg.broker_id,
                "url": cfg.advertised_url,
                "partitions": len(self.partitions),
            },
        )

    async def stop(self) -> None:
        self.ready = False
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for state in self.partitions.values():
            state.close()
        self.partitions.clear()
        if self.logs is not None:
            self.logs.close()
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self.brokers.deregister, self.config.broker_id)
        self.engine.dispose()
        log.info("broker stopped", extra={"broker_id": self.config.broker_id})

    async def _every(self, interval_ms: int, duty: object) -> None:
        assert callable(duty)
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await duty()
            except Exception:
                log.exception(
                    "background duty failed", extra={"duty": getattr(duty, "__name__", "")}
                )

    async def _heartbeat(self) -> None:
        cfg = self.config
        if not await asyncio.to_thread(self.brokers.heartbeat, cfg.broker_id, cfg.lease_ms):
            await asyncio.to_thread(
                self.brokers.register, cfg.broker_id, cfg.advertised_url, cfg.lease_ms
            )

    async def _refresh(self) -> None:
        if await asyncio.to_thread(self.cache.refresh):
            self.reconcile()

    async def _roll(self) -> None:
        if self.logs is not None:
            self.logs.roll_due(int(time.time() * 1000))

    # -- hosted partitions ------------------------------------------------------------------

    def reconcile(self) -> None:
        """Host exactly the partitions metadata gives this broker; drop logs of deleted topics."""
        assert self.logs is not None
        me = self.config.broker_id
        wanted: dict[tuple[str, int], tuple[TopicView, int]] = {}
        for view in self.cache.topics():
            for p in view.partitions:
                if me in p.replicas:
                    wanted[(view.info.name, p.partition)] = (view, p.leader_epoch)
        for key in list(self.partitions):
            state = self.partitions[key]
            entry = wanted.get(key)
            if entry is None or entry[0].info.id != state.log.topic_id:
                state.close()
                del self.partitions[key]
                self.logs.drop(*key)
                log.info("partition removed", extra={"topic": key[0], "partition": key[1]})
        known_ids = {v.info.id for v in self.cache.topics()}
        for topic, topic_id, partition in self.logs.existing():
            if topic_id not in known_ids and (topic, partition) not in self.partitions:
                self.logs.drop(topic, partition)
                log.info(
                    "stray log of a deleted topic removed",
                    extra={"topic": topic, "partition": partition, "topic_id": topic_id},
                )
        for key, (view, epoch) in wanted.items():
            hosted = self.partitions.get(key)
            if hosted is None:
                plog = self.logs.get_or_create(key[0], view.info.id, key[1], log_config(view))
                self.partitions[key] = PartitionState(key[0], key[1], plog, epoch)
            else:
                hosted.log.update_config(log_config(view))
                hosted.leader_epoch = epoch
        metrics.PARTITIONS_LED.set(len(self.partitions))

    def topic_view(self, topic: str) -> TopicView:
        view = self.cache.topic_or_refresh(topic)
        if view is None:
            raise TierlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {topic!r}")
        return view

    def partition(self, topic: str, partition: int) -> PartitionState:
        view = self.topic_view(topic)
        if not 0 <= partition < len(view.partitions):
            raise TierlogError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {topic!r} has partitions 0..{len(view.partitions) - 1}; got {partition}",
            )
        state = self.partitions.get((topic, partition))
        if state is None:
            self.reconcile()
            state = self.partitions.get((topic, partition))
        if state is None:
            raise TierlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.config.broker_id} does not host {topic}-{partition}",
            )
        return state

    def sticky_for(self, topic: str) -> StickyPartitioner:
        sticky = self.sticky.get(topic)
        if sticky is None:
            sticky = self.sticky[topic] = StickyPartitioner()
        return sticky


def serve(config: BrokerConfig) -> None:
    """Run one broker until SIGINT/SIGTERM."""
    from ingest.api.app import build_app

    broker = Broker(config)

    @contextlib.asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        await broker.start()
        # Long-lived startup objects leave the GC's view; produce bodies make many young
        # objects, and default thresholds would rescan everything far too often.
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            await broker.stop()

    gc.set_threshold(50_000, 20, 20)
    app = build_app(broker, lifespan)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
            limit_concurrency=4096,
        )
    )
    server.run()
