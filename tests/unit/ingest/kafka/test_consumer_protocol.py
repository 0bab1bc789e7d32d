"""The consumer protocol's bytes: subscriptions of every version in, assignments out."""

from __future__ import annotations

import io
import struct

import pytest
from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_subscription.v0.data import (
    ConsumerProtocolSubscription as SubV0,
)
from kio.schema.consumer_protocol_subscription.v3.data import (
    ConsumerProtocolSubscription as SubV3,
)
from kio.schema.consumer_protocol_subscription.v3.data import TopicPartition
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from ingest.kafka.consumer_protocol import decode_subscription, encode_assignment
from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicNamePartition as TP


def _bytes(version: int, body: object) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">h", version))
    entity_writer(type(body))(out, body)
    return out.getvalue()


def test_a_v0_subscription_names_topics_and_owns_nothing() -> None:
    raw = _bytes(0, SubV0(topics=("a", "b"), user_data=b"x"))
    sub = decode_subscription(raw)
    assert sub.topics == ("a", "b") and sub.owned == frozenset()


def test_a_v3_subscription_reports_what_a_cooperative_member_owns() -> None:
    owned = (TopicPartition(topic=TopicName("a"), partitions=(i32(0), i32(2))),)
    body = SubV3(topics=("a",), user_data=None, owned_partitions=owned, rack_id="r1")
    sub = decode_subscription(_bytes(3, body))
    assert sub.topics == ("a",) and sub.owned == {TP("a", 0), TP("a", 2)}


@pytest.mark.parametrize("raw", [b"", b"\0", b"\0\0\0\0\0\x05ab"])
def test_malformed_subscriptions_are_invalid_requests(raw: bytes) -> None:
    with pytest.raises(TierlogError) as err:
        decode_subscription(raw)
    assert err.value.code is ErrorCode.INVALID_REQUEST


def test_an_assignment_reads_back_as_kafka_writes_it() -> None:
    raw = encode_assignment((TP("b", 1), TP("a", 3), TP("a", 0)))
    assert raw[:2] == b"\0\0"
    body, used = entity_reader(ConsumerProtocolAssignment)(raw, 2)
    assert 2 + used == len(raw)
    assert [(t.topic, list(t.partitions)) for t in body.assigned_partitions] == [
        ("a", [0, 3]),
        ("b", [1]),
    ]
