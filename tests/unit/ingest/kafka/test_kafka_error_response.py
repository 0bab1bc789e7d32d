"""UNSUPPORTED_VERSION answers in the request's own version, mirrored from the request."""

from __future__ import annotations

import io
import struct
import uuid
from datetime import timedelta

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.delete_topics.v1.request import DeleteTopicsRequest
from kio.schema.delete_topics.v1.response import DeleteTopicsResponse
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v13.response import FetchResponse
from kio.schema.metadata.v0.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v0.response import MetadataResponse
from kio.serial import entity_reader, entity_writer

from ingest.kafka.error_response import answer_unsupported, error_response
from ingest.kafka.protocol import SUPPORTED, ProtocolError, peek_header

UNSUPPORTED = KafkaError.unsupported_version


def _versions(key: int) -> list[int]:
    out = []
    for v in range(20):
        try:
            load_request_schema(key, v)
        except Exception:
            continue
        out.append(v)
    return out


@pytest.mark.parametrize("key", sorted(SUPPORTED))
def test_every_version_of_every_served_api_has_an_encodable_error_answer(key: int) -> None:
    for v in _versions(key):
        cls = load_response_schema(key, v)
        out = io.BytesIO()
        entity_writer(cls)(out, error_response(cls, None, UNSUPPORTED, "no"))
        entity_reader(cls)(out.getvalue(), 0)


def test_per_partition_errors_mirror_the_request() -> None:
    tid = uuid.uuid4()
    part = FetchPartition(partition=3, fetch_offset=7, partition_max_bytes=1)
    request = FetchRequest(
        max_wait=timedelta(0),
        min_bytes=1,
        topics=(FetchTopic(topic_id=tid, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    got = error_response(FetchResponse, request, UNSUPPORTED, "no")
    assert got.error_code == UNSUPPORTED
    (topic,) = got.responses
    (p,) = topic.partitions
    assert (topic.topic_id, p.partition_index, p.error_code) == (tid, 3, UNSUPPORTED)
    assert p.high_watermark == -1 and p.records is None


def test_bare_names_become_entries() -> None:
    request = DeleteTopicsRequest(topic_names=("a", "b"), timeout=timedelta(0))
    got = error_response(DeleteTopicsResponse, request, UNSUPPORTED, "no")
    assert [(r.name, r.error_code) for r in got.responses] == [
        ("a", UNSUPPORTED),
        ("b", UNSUPPORTED),
    ]


def test_answer_in_the_request_version_or_a_protocol_error() -> None:
    out = io.BytesIO()
    entity_writer(MetadataRequest)(out, MetadataRequest(topics=(MetadataRequestTopic(name="t"),)))
    frame = struct.pack(">hhih", 3, 0, 42, -1) + out.getvalue()
    answer = answer_unsupported(peek_header(frame), frame)
    assert struct.unpack_from(">ii", answer) == (len(answer) - 4, 42)
    body, _ = entity_reader(MetadataResponse)(answer, 8)
    assert [(t.name, t.error_code) for t in body.topics] == [("t", UNSUPPORTED)]
    too_old = struct.pack(">hhih", 1, 3, 43, -1)  # Fetch v3: not in any schema kio has
    with pytest.raises(ProtocolError, match="no schema"):
        answer_unsupported(peek_header(too_old), too_old)
