"""Request headers, kio types across versions, error names, and the bounded codecs."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.metadata.v1.response import MetadataResponseBroker as BrokerV1
from kio.schema.metadata.v12.response import MetadataResponseBroker as BrokerV12

from ingest.kafka.compression import decompress
from ingest.kafka.protocol import ProtocolError, build, kafka_error, peek_header, supported
from logformat.errors import ErrorCode, TierlogError


def test_header_fields_and_where_the_body_starts() -> None:
    frame = struct.pack(">hhih", 3, 12, 99, 3) + b"abc" + b"\0rest"
    h = peek_header(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 12, 99, "abc")
    assert frame[h.body_start :] == b"\0rest"
    assert peek_header(struct.pack(">hhih", 18, 0, 1, -1)).client_id is None


@pytest.mark.parametrize(
    "frame", [b"", b"\0\x12\0\0\0\0\0", struct.pack(">hhih", 3, 1, 1, 50) + b"short"]
)
def test_short_headers_are_protocol_errors(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        peek_header(frame)


def test_served_versions() -> None:
    assert supported(0, 3) and supported(0, 9) and not supported(0, 2)
    assert not supported(1, 13)  # Fetch by topic id
    assert supported(24, 3) and not supported(24, 4)  # v4+: the brokers' batch form


def test_build_keeps_the_fields_of_each_version() -> None:
    fields = {"node_id": 1, "host": "h", "port": 9092, "rack": "r", "no_such_field": 0}
    assert build(BrokerV1, **fields) == BrokerV1(node_id=1, host="h", port=9092, rack="r")
    assert build(BrokerV12, **fields).rack == "r"


def test_tierlog_error_names_are_kafka_codes() -> None:
    assert kafka_error(TierlogError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "")) == 6
    assert kafka_error(TierlogError(ErrorCode.CORRUPT_MESSAGE, "")) == KafkaError.corrupt_message
    # tierlog-only names have no Kafka code: the generic one
    assert kafka_error(TierlogError(ErrorCode.NOT_FOUND, "")) == KafkaError.unknown_server_error


def test_xerial_snappy_and_its_bound() -> None:
    """The Java client's snappy framing: magic, versions, then length-prefixed blocks."""
    parts = [b"a" * 1000, b"b" * 500]
    blocks = [bytes(pa.Codec("snappy").compress(p, asbytes=True)) for p in parts]
    framed = b"\x82SNAPPY\0" + struct.pack(">ii", 1, 1)
    framed += b"".join(struct.pack(">i", len(b)) + b for b in blocks)
    assert decompress(2, framed, 1500) == b"".join(parts)
    with pytest.raises(TierlogError) as err:
        decompress(2, framed, 1499)
    assert err.value.code is ErrorCode.MESSAGE_TOO_LARGE  # Kafka's RecordTooLargeException


@pytest.mark.parametrize("codec", [3, 4])
def test_lz4_and_zstd_are_bounded(codec: int) -> None:
    name = {3: "lz4", 4: "zstd"}[codec]
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, name) as out:
        out.write(b"\0" * 100_000)
    data = sink.getvalue().to_pybytes()
    assert decompress(codec, data, 100_000) == b"\0" * 100_000
    with pytest.raises(TierlogError):
        decompress(codec, data, 99_999)
