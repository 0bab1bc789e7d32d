"""Topic administration: create, list, describe, alter configs, add partitions, delete."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse, field_int, json_object, only_fields
from ingest.api.partition_stats import led_stats
from ingest.service.txn_log import txn_log
from ingest.tiered.tier_status import TierStatus
from logformat.errors import ErrorCode, TierlogError
from metadata.acl import CLUSTER_NAME
from metadata.configs import effective_configs
from metadata.types import PartitionRecord

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView
    from ingest.broker import Broker

log = logging.getLogger("tierlog.api.topics")

MAX_PARTITIONS = 10_000
ADMIN_BODY_LIMIT = 1024 * 1024


async def _remote_offsets(broker: Broker, view: TopicView) -> dict[int, dict[str, Any]]:
    """Offsets and stats of partitions led by other brokers (ingest/api/partition_stats.py),
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
    except Exception:  # the manifest is unreadable: describe the hot tier alone
        log.exception("reading the cold manifest failed", extra={"topic": view.info.name})
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


CREATE_FIELDS = ("name", "partitions", "replication_factor", "configs")


def _configs_arg(doc: dict[str, Any]) -> dict[str, Any]:
    configs = doc.get("configs", {})
    if not isinstance(configs, dict):
        raise TierlogError(ErrorCode.INVALID_CONFIG, '"configs" must be an object of name → value')
    return configs


async def _after_change(broker: Broker) -> None:
    await asyncio.to_thread(broker.cache.refresh, True)
    broker.reconcile()


async def create_topic(request: Request) -> JSONResponse:
    broker: Broker = request.app.state.broker
    doc = await json_object(request, ADMIN_BODY_LIMIT)
    only_fields(doc, CREATE_FIELDS)
    name = doc.get("name")
    if not isinstance(name, str):
        raise TierlogError(ErrorCode.INVALID_TOPIC_EXCEPTION, '"name" must be a string')
    partitions = field_int(
        doc,
        "partitions",
        broker.config.default_partitions,
        1,
        MAX_PARTITIONS,
        ErrorCode.INVALID_PARTITIONS,
    )
    rf = field_int(
        doc,
        "replication_factor",
        broker.config.default_replication_factor,
        1,
        1000,
        ErrorCode.INVALID_REPLICATION_FACTOR,
    )
    configs = _configs_arg(doc)
    # Kafka's CreateTopics: CREATE on the cluster or on the topic name.
    if not auth.permitted(request, "cluster", CLUSTER_NAME, "create"):
        auth.require(request, "topic", name, "create")
    await asyncio.to_thread(broker.topics.create, name, partitions, rf, configs)
    await _after_change(broker)
    view = await broker.cache.require_topic(name)
    return JSONResponse(await describe(broker, view), status_code=201)


async def list_topics(request: Request) -> JSONResponse:
    broker: Broker = request.app.state.broker
    await asyncio.to_thread(broker.cache.refresh)
    return JSONResponse(
        {
            "topics": [
                {
                    "name": v.info.name,
                    "partitions": v.info.partition_count,
                    "replication_factor": v.info.replication_factor,
                }
                for v in broker.cache.topics()
                if auth.permitted(request, "topic", v.info.name, "describe")  # no leaks
            ]
        }
    )


async def describe_topic(request: Request) -> JSONResponse:
    broker: Broker = request.app.state.broker
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "describe")
    return JSONResponse(await describe(broker, await broker.cache.require_topic(topic)))


async def alter_configs(request: Request) -> JSONResponse:
    """Body {"configs": {"name": value, "other": null}}: a value sets, null restores the default."""
    broker: Broker = request.app.state.broker
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "alter")  # Kafka: ALTER_CONFIGS
    await broker.cache.require_topic(topic)
    doc = await json_object(request, ADMIN_BODY_LIMIT)
    # {"retention.ms": ...} without the wrapper would otherwise be a silent no-op (K14).
    only_fields(doc, ("configs",), 'the body {"configs": {...}}', ErrorCode.INVALID_CONFIG)
    if "configs" not in doc:
        why = 'the body must be {"configs": {"name": value, "other": null}}'
        raise TierlogError(ErrorCode.INVALID_CONFIG, why)
    configs = _configs_arg(doc)
    to_set = {k: v for k, v in configs.items() if v is not None}
    to_delete = [k for k, v in configs.items() if v is None]
    await asyncio.to_thread(broker.topics.alter_configs, topic, to_set, to_delete)
    await _after_change(broker)
    return JSONResponse(await describe(broker, await broker.cache.require_topic(topic)))


async def add_partitions(request: Request) -> JSONResponse:
    """Body {"partitions": N}: the new total, as Kafka's CreatePartitions takes it."""
    broker: Broker = request.app.state.broker
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "alter")  # Kafka's CreatePartitions: ALTER
    await broker.cache.require_topic(topic)
    doc = await json_object(request, ADMIN_BODY_LIMIT)
    only_fields(doc, ("partitions",), 'the body {"partitions": N}', ErrorCode.INVALID_PARTITIONS)
    total = field_int(doc, "partitions", None, 1, MAX_PARTITIONS, ErrorCode.INVALID_PARTITIONS)
    await asyncio.to_thread(broker.topics.add_partitions, topic, total)
    await _after_change(broker)
    return JSONResponse(await describe(broker, await broker.cache.require_topic(topic)))


async def delete_topic(request: Request) -> JSONResponse:
    broker: Broker = request.app.state.broker
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "delete")
    await broker.cache.require_topic(topic)
    info = await asyncio.to_thread(broker.topics.delete, topic)
    await _after_change(broker)
    return JSONResponse({"name": info.name, "id": info.id, "deleted": True})


routes = [
    Route("/topics", create_topic, methods=["POST"]),
    Route("/topics", list_topics, methods=["GET"]),
    Route("/topics/{topic}", describe_topic, methods=["GET"]),
    Route("/topics/{topic}", delete_topic, methods=["DELETE"]),
    Route("/topics/{topic}/configs", alter_configs, methods=["PATCH"]),
    Route("/topics/{topic}/partitions", add_partitions, methods=["POST"]),
]
