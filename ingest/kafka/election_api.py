"""ElectLeaders (API key 43), by the leader-election service (ingest/service/
leader_election.py): ALTER on the cluster, as Kafka; the partitions asked (or every one, for
a null list) elected at once, each answered on its own."""

from __future__ import annotations

import asyncio

from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.elect_leaders.v2.response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kio.schema.errors import ErrorCode as KafkaError
from kio.static.primitive import i32

from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build, kafka_error, nested
from ingest.service.leader_election import PREFERRED
from logformat.errors import TierlogError
from metadata.acl import CLUSTER_NAME

Outcome = tuple[KafkaError, str | None]


async def _elect(
    ctx: KafkaContext, kind: int, topic: str, partition: int, wait_s: float
) -> Outcome:
    try:
        await ctx.services.elections.elect(kind, topic, partition, wait_s)
    except TierlogError as exc:
        return kafka_error(exc), exc.message
    return KafkaError.none, None


async def handle_elect_leaders(
    ctx: KafkaContext,
    request: ElectLeadersRequest,
    response_cls: type[ElectLeadersResponse],
) -> ElectLeadersResponse:
    if request.topic_partitions is None:
        wanted = ctx.services.elections.every_partition()
    else:
        wanted = [(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    outcomes: list[Outcome]
    top = KafkaError.none
    if not ctx.allowed("cluster", CLUSTER_NAME, "alter"):
        top = KafkaError.cluster_authorization_failed
        why = f"{ctx.principal} may not elect leaders"
        outcomes = [(top, why)] * len(wanted) if request.topic_partitions is not None else []
        wanted = wanted if request.topic_partitions is not None else []
    else:
        kind = int(getattr(request, "election_type", PREFERRED))  # v0: preferred only
        wait_s = request.timeout.total_seconds()
        outcomes = list(await asyncio.gather(*(_elect(ctx, kind, t, p, wait_s) for t, p in wanted)))
    part_cls = nested(response_cls, PartitionResult)
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, partition), (error, message) in zip(wanted, outcomes, strict=True):
        if request.topic_partitions is None and error == KafkaError.election_not_needed:
            continue  # as Kafka: electing every partition names only those it elected
        by_topic.setdefault(topic, []).append(
            build(part_cls, partition_id=i32(partition), error_code=error, error_message=message)
        )
    result_cls = nested(response_cls, ReplicaElectionResult)
    results = tuple(
        build(result_cls, topic=t, partition_result=tuple(ps)) for t, ps in by_topic.items()
    )
    return build(
        response_cls,
        throttle_time=NO_THROTTLE,
        error_code=top,
        replica_election_results=results,
    )
