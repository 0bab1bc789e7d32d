"""What describing a topic answers, for the HTTP API and the console: per partition its
replicas, offsets across both tiers (the hot log's from its leader, here or asked of the
other leader over /internal/topics/{t}/led; the cold range from the manifest), sizes and
tiering lag (partition_stats.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from failures.logged import log_failure
from ingest.service.partition_stats import led_stats
from ingest.service.txn_log import txn_log
from ingest.tiered.tier_status import TierStatus
from metadata.configs import effective_configs
from metadata.types import PartitionRecord

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView
    from ingest.broker import Broker

log = logging.getLogger("tierlog.api.topics")


async def _remote_offsets(broker: Broker, view: TopicView) -> dict[int, dict[str, Any]]:
    """Offsets and stats of partitions led by other brokers (ingest/service/partition_stats.py),
    asked of each leader once (best effort)."""
    me = broker.config.broker_id
    leaders = {p.leader for p in view.partitions if p.leader is not None and p.leader != me}
    out: dict[int, dict[str, Any]] = {}

    async def ask(leader: int) -> None:
        url = broker.cache.broker_url(leader)
        if url is None:
            return
        try:
            doc = await broker.forwarder.get_json(f"{url}/internal/topics/{view.info.name}/led")
        except Exception:
            return  # an unreachable leader shows null offsets rather than failing describe
        if isinstance(doc, dict):
            out.update({int(k): v for k, v in doc.items()})

    await asyncio.gather(*(ask(leader) for leader in leaders))
    return out


async def _tier_status(broker: Broker, view: TopicView) -> dict[int, TierStatus] | None:
    """Cold range and tiered end per partition (None: the manifest could not be read)."""
    if not view.config.remote_storage_enable:
        return {}
    try:
        return await broker.tier_status.of_partitions(
            view.info.id, [p.partition for p in view.partitions]
        )
    except Exception as exc:  # the manifest is unreadable: describe the hot tier alone
        log_failure(log, "reading the cold manifest failed", exc, {"topic": view.info.name})
        return None


def _partition_doc(
    p: PartitionRecord, offsets: dict[str, Any] | None, tier: TierStatus | None, tiering: bool
) -> dict[str, Any]:
    cold = tier.cold if tier is not None else None
    hot_start = offsets["log_start_offset"] if offsets else None
    hw = offsets["high_watermark"] if offsets else None
    start = hot_start if cold is None else min(cold[0], hot_start or cold[0])
    if start is not None and tier is not None and tier.log_start is not None:
        start = max(start, tier.log_start)  # retention moved it; replicas catch up
    lag: int | None = 0
    if tiering:
        lag = None
        if hw is not None and hot_start is not None and tier is not None:
            end = tier.tiered_end if tier.tiered_end is not None else hot_start
            lag = max(0, hw - end)
    return {
        "partition": p.partition,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "replicas": p.replicas,
        "isr": p.isr,
        "log_start_offset": start,
        "high_watermark": hw,
        # Below it no transaction is open: what read_committed readers (Spark) may read.
        "last_stable_offset": offsets.get("last_stable_offset") if offsets else None,
        "log_end_offset": offsets["log_end_offset"] if offsets else None,
        "hot": ({"start": hot_start, "end": offsets["log_end_offset"]} if offsets else None),
        "cold": {"start": cold[0], "end": cold[1]} if cold is not None else None,
        "tiering_lag": lag,
        # The leader's figures (null when it could not be asked).
        "hot_bytes": offsets.get("hot_bytes") if offsets else None,
        "cold_bytes": tier.cold_bytes if tier is not None else (None if tiering else 0),
        "tiering_lag_bytes": offsets.get("tiering_lag_bytes") if offsets else None,
        "tiering_lag_seconds": offsets.get("tiering_lag_seconds") if offsets else None,
        # Of tiering_lag, the records in the open segment (tiered once it rolls).
        "tiering_lag_open_records": offsets.get("tiering_lag_open_records") if offsets else None,
    }


async def describe(broker: Broker, view: TopicView) -> dict[str, Any]:
    """The topic's description (GET /topics/{topic})."""
    remote, tiers = await asyncio.gather(_remote_offsets(broker, view), _tier_status(broker, view))
    tiering = view.config.remote_storage_enable
    partitions = []
    for p in view.partitions:
        tier = tiers.get(p.partition) if tiers is not None else None
        state = broker.leader_state(view.info.name, p.partition)
        offsets = (
            led_stats(state, tiering, tier, await txn_log(broker).described_stable(state))
            if state is not None
            else remote.get(p.partition)
        )
        partitions.append(_partition_doc(p, offsets, tier, tiering))
    return {
        "name": view.info.name,
        "id": view.info.id,
        "replication_factor": view.info.replication_factor,
        "configs": effective_configs(view.info.configs),
        "partitions": partitions,
    }


class Describer:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def describe(self, principal: str, topic: str) -> dict[str, Any]:
        """GET /topics/{topic}: DESCRIBE on the topic (checked before the lookup)."""
        self._broker.authorizer.require(principal, "topic", topic, "describe")
        return await self.described(topic)

    async def described(self, topic: str) -> dict[str, Any]:
        """The topic's description, after a change the caller was authorized for."""
        return await describe(self._broker, await self._broker.cache.require_topic(topic))

    async def led(self, topic: str) -> dict[str, dict[str, Any]]:
        """Offsets and stats of the topic's partitions this broker leads, by partition (what
        describe on another node asks of this one)."""
        broker = self._broker
        led = {
            p: state
            for (name, p), state in broker.partitions.items()
            if name == topic and broker.leader_state(name, p) is not None
        }
        view = broker.cache.topic(topic)
        tiering = view is not None and view.config.remote_storage_enable
        tiers: dict[int, TierStatus] | None = {}
        if tiering and led and view is not None:
            try:
                tiers = await broker.tier_status.of_partitions(view.info.id, list(led))
            except Exception as exc:  # describe shows the offsets without the lag figures
                log_failure(log, "reading the cold manifest failed", exc, {"topic": topic})
                tiers = None
        txns = txn_log(broker)
        return {
            str(p): led_stats(
                state,
                tiering,
                tiers.get(p) if tiers is not None else None,
                await txns.described_stable(state),
            )
            for p, state in led.items()
        }
