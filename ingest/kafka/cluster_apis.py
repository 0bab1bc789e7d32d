"""ApiVersions, Metadata, DescribeCluster and InitProducerId over the broker's metadata
cache."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.schema.describe_cluster.v2.response import DescribeClusterBroker, DescribeClusterResponse
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.static.protocol import Entity

from cluster.metadata_cache import TopicView
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import SUPPORTED, build, kafka_error, nested
from logformat.errors import TierlogError
from metadata.acl import CLUSTER_NAME
from metadata.brokers import SESSION_TIMEOUT
from metadata.types import BrokerRegistration

NO_THROTTLE = timedelta(0)
SESSION_GRACE = SESSION_TIMEOUT  # Kafka's broker.session.timeout.ms default
NOT_ASKED = -2147483648  # authorized operations the client did not ask for


E = TypeVar("E", bound=Entity)


def api_versions(
    response_cls: type[ApiVersionsResponse], error: KafkaError = KafkaError.none
) -> ApiVersionsResponse:
    """The served APIs; also the answer (as v0) to an ApiVersions version we do not serve."""
    entry = nested(response_cls, ApiVersion)
    keys = tuple(
        build(entry, api_key=key, min_version=lo, max_version=hi)
        for key, (lo, hi) in sorted(SUPPORTED.items())
    )
    return build(response_cls, error_code=error, api_keys=keys, throttle_time=NO_THROTTLE)


async def handle_api_versions(
    ctx: KafkaContext, request: ApiVersionsRequest, response_cls: type[ApiVersionsResponse]
) -> ApiVersionsResponse:
    return api_versions(response_cls)


def _partition(
    ctx: KafkaContext, response_cls: type[MetadataResponse], view: TopicView, p: int
) -> MetadataResponsePartition:
    rec = view.partitions[p]
    leader = -1 if rec.leader is None else rec.leader
    return build(
        nested(response_cls, MetadataResponsePartition),
        error_code=KafkaError.none if rec.leader is not None else KafkaError.leader_not_available,
        partition_index=p,
        leader_id=leader,
        leader_epoch=rec.leader_epoch,
        replica_nodes=tuple(rec.replicas),
        isr_nodes=tuple(rec.isr),
        offline_replicas=tuple(r for r in rec.replicas if ctx.kafka_address(r) is None),
    )


def _topic(
    response_cls: type[MetadataResponse],
    name: str | None,
    error: KafkaError,
    view: TopicView | None = None,
    partitions: tuple[MetadataResponsePartition, ...] = (),
) -> MetadataResponseTopic:
    return build(
        nested(response_cls, MetadataResponseTopic),
        error_code=error,
        name=name,
        topic_id=uuid.UUID(view.info.id) if view is not None else uuid.UUID(int=0),
        is_internal=False,
        partitions=partitions,
        topic_authorized_operations=NOT_ASKED,
    )


def _named(ctx: KafkaContext, request: MetadataRequest) -> list[str | None] | None:
    """The topic names asked for; None for all of them."""
    if request.topics is None:
        return None
    out: list[str | None] = []
    for t in request.topics:
        name = getattr(t, "name", None)
        if name is None and getattr(t, "topic_id", None) is not None:  # v10+: by id
            ids = {v.info.id: v.info.name for v in ctx.services.metadata.topics()}
            name = ids.get(str(t.topic_id))
        out.append(name)
    return out


async def _one_topic(
    ctx: KafkaContext, response_cls: type[MetadataResponse], name: str | None
) -> MetadataResponseTopic:
    if name is None:
        return _topic(response_cls, None, KafkaError.unknown_topic_id)
    try:
        ctx.require("topic", name, "describe")
        view = await ctx.services.metadata.require_topic(name)
    except TierlogError as exc:
        return _topic(response_cls, name, kafka_error(exc))
    parts = tuple(_partition(ctx, response_cls, view, p) for p in range(len(view.partitions)))
    return _topic(response_cls, name, KafkaError.none, view, parts)


def _listed(reg: BrokerRegistration, now: datetime) -> bool:
    """Live, or dead for less than Kafka's session timeout. Kafka lists a killed broker
    until its session ends (broker.session.timeout.ms, 9 s by default); librdkafka needs that
    window: it drops a broker Metadata no longer lists, and a coordinator it had cached on
    that broker is then never looked up again (librdkafka issue 5511: a transactional
    producer's send_offsets_to_transaction hung for good when our brokers dropped the
    killed group coordinator within a second). No partition is led by it meanwhile. A
    cleanly stopped broker is not listed: its deregistration ends the session too
    (metadata/brokers.py, as Kafka fences a broker once its controlled shutdown is done)."""
    return reg.alive or reg.lease_expires_at > now - SESSION_GRACE


def _alive(ctx: KafkaContext) -> list[int]:
    """The brokers a controller may be named among: live ones with a Kafka address. Not the
    just-dead ones _listed keeps: librdkafka sends controller-bound requests (ElectLeaders)
    to the named controller and waits for it to answer."""
    brokers = ctx.services.metadata.brokers.items()
    return [i for i, reg in brokers if reg.alive and ctx.kafka_address(i) is not None]


def _brokers(ctx: KafkaContext, cls: type[E], fenced_too: bool = False) -> tuple[E, ...]:
    """The brokers with their Kafka address, live or just dead (_listed; every dead one,
    marked fenced, when asked: DescribeCluster v2)."""
    out = []
    now = datetime.now(UTC)
    for broker_id, reg in sorted(ctx.services.metadata.brokers.items()):
        address = ctx.kafka_address(broker_id)
        if address is not None and (fenced_too or _listed(reg, now)):
            host, port = address
            out.append(
                build(
                    cls,
                    node_id=broker_id,
                    broker_id=broker_id,
                    host=host,
                    port=port,
                    rack=reg.rack,
                    is_fenced=not reg.alive,
                )
            )
    return tuple(out)


async def handle_metadata(
    ctx: KafkaContext, request: MetadataRequest, response_cls: type[MetadataResponse]
) -> MetadataResponse:
    names = _named(ctx, request)
    if names is None:  # every topic the caller may see, silently leaving out the others
        names = [
            v.info.name
            for v in ctx.services.metadata.topics()
            if ctx.allowed("topic", v.info.name, "describe")
        ]
    topics = [await _one_topic(ctx, response_cls, n) for n in names]
    brokers = _brokers(ctx, nested(response_cls, MetadataResponseBroker))
    return build(
        response_cls,
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=await ctx.identity.cluster_id(),
        controller_id=await ctx.identity.controller_id(_alive(ctx)),
        topics=tuple(topics),
        cluster_authorized_operations=NOT_ASKED,
    )


BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2  # DescribeCluster's endpoint types (KIP-919)
# Kafka's AclOperation codes of the operations tierlog's ACLs name.
_ACL_CODES = {"read": 3, "write": 4, "create": 5, "delete": 6, "alter": 7, "describe": 8}


def _cluster_operations(ctx: KafkaContext) -> int:
    bits = 0
    for operation, code in _ACL_CODES.items():
        if ctx.allowed("cluster", CLUSTER_NAME, operation):
            bits |= 1 << code
    return bits


async def handle_describe_cluster(
    ctx: KafkaContext, request: DescribeClusterRequest, response_cls: type[DescribeClusterResponse]
) -> DescribeClusterResponse:
    """The brokers, the controller (the lease holder) and the cluster id, as Metadata has
    them; brokers serve no controller endpoints (there is no KRaft quorum to reach)."""
    endpoint = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
    fields: dict[str, object] = {"throttle_time": NO_THROTTLE, "endpoint_type": endpoint}
    fields.update(cluster_id=await ctx.identity.cluster_id(), brokers=())
    fields.update(controller_id=await ctx.identity.controller_id(_alive(ctx)))
    fields.update(error_code=KafkaError.none, error_message=None)
    ops = _cluster_operations(ctx) if request.include_cluster_authorized_operations else NOT_ASKED
    fields["cluster_authorized_operations"] = ops
    if endpoint == CONTROLLERS_ENDPOINT:
        message = "tierlog brokers serve broker endpoints only: there are no controller nodes"
        fields.update(error_code=KafkaError.mismatched_endpoint_type, error_message=message)
    elif endpoint != BROKERS_ENDPOINT:
        message = f"endpoint type {endpoint} is unknown: 1 (brokers) or 2 (controllers)"
        fields.update(error_code=KafkaError.unsupported_endpoint_type, error_message=message)
    else:
        fenced = getattr(request, "include_fenced_brokers", False)
        fields["brokers"] = _brokers(ctx, nested(response_cls, DescribeClusterBroker), fenced)
    return build(response_cls, **fields)


async def handle_init_producer_id(
    ctx: KafkaContext, request: InitProducerIdRequest, response_cls: type[InitProducerIdResponse]
) -> InitProducerIdResponse:
    """An idempotent producer's id, from the same Postgres sequence as POST /producers (a
    transactional id's request goes to txn_apis.py instead)."""

    def answer(error: KafkaError, pid: int = -1, epoch: int = -1) -> InitProducerIdResponse:
        return build(
            response_cls,
            throttle_time=NO_THROTTLE,
            error_code=error,
            producer_id=pid,
            producer_epoch=epoch,
        )

    try:
        pid = await ctx.services.producer_ids.allocate(ctx.principal)
    except TierlogError as exc:  # KIP-679's rule refused it: CLUSTER_AUTHORIZATION_FAILED
        return answer(kafka_error(exc))
    except Exception:  # Postgres unreachable: retriable for the client, not a dead connection
        return answer(KafkaError.coordinator_not_available)
    return answer(KafkaError.none, pid, 0)
