"""The consumer protocol's bytes inside JoinGroup and SyncGroup: a member's subscription in,
its assignment out (Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment, a
version int16 then the body; kio has the bodies)."""

from __future__ import annotations

import io
import struct
from typing import NamedTuple

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment,
    TopicPartition,
)
from kio.schema.consumer_protocol_subscription.v0.data import (
    ConsumerProtocolSubscription as SubscriptionV0,
)
from kio.schema.consumer_protocol_subscription.v1.data import (
    ConsumerProtocolSubscription as SubscriptionV1,
)
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicNamePartition

_VERSION = struct.Struct(">h")


class Subscription(NamedTuple):
    topics: tuple[str, ...]
    owned: frozenset[TopicNamePartition]  # v1+: what a cooperative member keeps


def decode_subscription(raw: bytes) -> Subscription:
    """Versions 1 and later share v1's leading fields (later ones append generation and
    rack, which the server does not need), so v1's reader serves them all."""
    if len(raw) < _VERSION.size:
        raise TierlogError(ErrorCode.INVALID_REQUEST, "a consumer subscription of no bytes")
    (version,) = _VERSION.unpack_from(raw)
    schema: type[SubscriptionV0] | type[SubscriptionV1] = (
        SubscriptionV0 if version == 0 else SubscriptionV1
    )
    try:
        body, _ = entity_reader(schema)(raw, _VERSION.size)
    except Exception as exc:  # kio raises several types for bad bytes
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, f"malformed consumer subscription v{version}: {exc}"
        ) from None
    owned = getattr(body, "owned_partitions", ())
    return Subscription(
        tuple(body.topics),
        frozenset(TopicNamePartition(tp.topic, int(p)) for tp in owned for p in tp.partitions),
    )


def decode_assignment(raw: bytes) -> tuple[TopicNamePartition, ...]:
    """The partitions in a leader's assignment (every version shares v0's leading fields);
    b"" is Kafka's empty assignment."""
    if not raw:
        return ()
    if len(raw) < _VERSION.size:
        raise TierlogError(ErrorCode.INVALID_REQUEST, "a consumer assignment of one byte")
    try:
        body, _ = entity_reader(ConsumerProtocolAssignment)(raw, _VERSION.size)
    except Exception as exc:  # kio raises several types for bad bytes
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, f"malformed consumer assignment: {exc}"
        ) from None
    return tuple(
        TopicNamePartition(tp.topic, int(p))
        for tp in body.assigned_partitions
        for p in tp.partitions
    )


def encode_subscription(topics: tuple[str, ...]) -> bytes:
    """A v0 subscription naming these topics: what DescribeGroups shows for a member that
    sent none (an HTTP member, or one the server assigns)."""
    out = io.BytesIO()
    out.write(_VERSION.pack(0))
    body = SubscriptionV0(topics=tuple(TopicName(t) for t in topics), user_data=None)
    entity_writer(SubscriptionV0)(out, body)
    return out.getvalue()


def encode_assignment(partitions: tuple[TopicNamePartition, ...]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    body = ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            TopicPartition(topic=TopicName(t), partitions=tuple(i32(p) for p in sorted(ps)))
            for t, ps in sorted(by_topic.items())
        ),
        user_data=None,
    )
    out = io.BytesIO()
    out.write(_VERSION.pack(0))
    entity_writer(ConsumerProtocolAssignment)(out, body)
    return out.getvalue()
