"""The rules ingest/service/ holds once for HTTP and Kafka (issue 24): expansion while a
Kafka batch decompresses, header bounds before any header is walked, timestamps without an
int64 wrap and within the topic's skew bounds, Kafka's fetch.max.bytes rules, entries per
request."""

from __future__ import annotations

import gzip

import numpy as np
import pyarrow as pa
import pytest

from ingest.broker_config import BrokerConfig
from ingest.data_limits import DataLimits
from ingest.kafka.record_batch import HEADER_SIZE, decode_batch
from ingest.produce import plan_json
from ingest.service.expansion import decode_budget
from ingest.service.fetch_rules import ResponseBudget, capped_max_bytes, merged
from ingest.service.headers import check_header_column, check_headers
from ingest.service.request_counts import check_count
from ingest.service.timestamps import check_timestamps, combine
from logformat.arrow_records import MAX_TIMESTAMP_MS
from logformat.errors import ErrorCode, TierlogError
from logformat.expansion import ExpansionLimits
from logformat.partitioner import StickyPartitioner
from logformat.schema import HEADERS
from metadata.configs import topic_config
from tests.kafka_batches import NOW, compressed, header_bomb, reseal, small_batch

LIMITS = ExpansionLimits(1_000_000, 128 * 1024 * 1024, 100.0)  # the broker's defaults


# -- K1: expansion, checked while decompressing ---------------------------------------------


def _bomb(codec: int) -> bytes:
    """64 MiB of zeros (a few KiB compressed) in `codec`. Made when the test runs, not when
    the module is collected: every xdist worker collects it, one runs it (~0.3 CPU-s each)."""
    zeros = bytes(64 * 1024 * 1024)
    if codec == 1:
        return gzip.compress(zeros, 1)
    return compressed({3: "lz4", 4: "zstd"}[codec], zeros)


@pytest.mark.parametrize("codec", [1, 3, 4, 2])
def test_a_compressed_bomb_is_refused_by_the_ratio_cap(codec: int) -> None:
    # raw snappy (2) declares its size first: 2^31 bytes, refused before decompressing
    body = b"\x80\x80\x80\x80\x08" + bytes(64) if codec == 2 else _bomb(codec)
    with pytest.raises(TierlogError) as err:
        decode_batch(reseal(small_batch(), codec, body), LIMITS)
    assert err.value.code is ErrorCode.MESSAGE_TOO_LARGE
    assert "--max-compression-ratio" in err.value.message or "decoded" in err.value.message


def test_the_decode_budget_is_the_ratio_past_the_exempt_size() -> None:
    assert decode_budget(17 * 1024, LIMITS) == 17 * 1024 * 100
    assert decode_budget(10, LIMITS) == 1 << 20  # small bodies may expand to 1 MiB
    assert decode_budget(10 << 20, LIMITS) == 128 * 1024 * 1024
    assert decode_budget(10, ExpansionLimits(1, 1000, float("inf"))) == 1000


def test_a_batch_within_the_ratio_still_decodes() -> None:
    plain = small_batch(50)
    body = compressed("zstd", plain[HEADER_SIZE:])
    assert decode_batch(reseal(plain, 4, body), LIMITS).records.num_rows == 50


# -- K2: headers ---------------------------------------------------------------------------


def test_the_header_bomb_is_refused_before_its_headers_are_walked() -> None:
    with pytest.raises(TierlogError) as err:
        decode_batch(header_bomb(9, 80_000), LIMITS)
    assert err.value.code is ErrorCode.INVALID_RECORD
    assert err.value.extra["record_index"] == 0
    assert "--max-headers-per-record" in err.value.message


def test_headers_within_the_bounds_decode() -> None:
    got = decode_batch(header_bomb(3, 1000), LIMITS).records
    assert [len(h) for h in got.column("headers").to_pylist()] == [1000] * 3


def test_header_bounds_per_batch_and_in_bytes() -> None:
    small = DataLimits(max_headers_per_record=10, max_headers_per_batch=25)
    check_headers(np.array([10, 10, 5]), np.array([20, 20, 10]), small)
    with pytest.raises(TierlogError, match="--max-headers-per-batch"):
        check_headers(np.array([10, 10, 6]), np.array([20, 20, 12]), small)
    with pytest.raises(TierlogError, match=r"record 1 .*--max-header-bytes-per-record"):
        limits = DataLimits(max_header_bytes_per_record=1000)
        check_headers(np.array([1, 1]), np.array([5, 2000]), limits)


def test_the_http_headers_column_is_held_to_the_same_bounds() -> None:
    column = pa.array(
        [None, [{"key": "a", "value": b"xyz"}] * 3, [{"key": "bb", "value": None}]], HEADERS
    )
    check_header_column(column, DataLimits(max_headers_per_record=3, max_header_bytes_per_batch=14))
    with pytest.raises(TierlogError, match="record 1 carries 4 header entries"):
        check_header_column(
            pa.array([None, [{"key": "a", "value": b""}] * 4], HEADERS),
            DataLimits(max_headers_per_record=3),
        )
    with pytest.raises(TierlogError, match="the batch carries 14 header bytes"):
        check_header_column(column, DataLimits(max_header_bytes_per_batch=13))


# -- K4: timestamps ------------------------------------------------------------------------


def test_base_plus_delta_never_wraps() -> None:
    deltas = np.array([0, 1, 2**62], np.int64)
    with pytest.raises(TierlogError) as err:
        combine(NOW, deltas)
    assert err.value.code is ErrorCode.INVALID_TIMESTAMP and err.value.extra["record_index"] == 2
    with pytest.raises(TierlogError):  # base -2^63 + a delta that brings it "back" in range
        combine(-(2**63), np.array([2**63 - 1], np.int64))
    assert combine(5, np.array([0, -5, MAX_TIMESTAMP_MS - 5])).tolist() == [5, 0, MAX_TIMESTAMP_MS]


@pytest.mark.parametrize(
    "stamp,configs,ok",
    [
        (NOW + 3_600_000, {}, True),  # Kafka's default: an hour ahead
        (NOW + 3_600_001, {}, False),
        (0, {}, True),  # any time behind, by default
        (NOW - 1001, {"message.timestamp.before.max.ms": "1000"}, False),
        (NOW + 2**62, {"message.timestamp.type": "LogAppendTime"}, False),  # out of range
        (NOW + 10**9, {"message.timestamp.type": "LogAppendTime"}, True),  # overwritten
    ],
)
def test_topic_timestamp_bounds(stamp: int, configs: dict[str, str], ok: bool) -> None:
    stamps = np.array([NOW, stamp], np.int64)
    if ok:
        check_timestamps(stamps, topic_config(configs), NOW)
        return
    with pytest.raises(TierlogError) as err:
        check_timestamps(stamps, topic_config(configs), NOW)
    assert err.value.code is ErrorCode.INVALID_TIMESTAMP and err.value.http_status == 422
    assert err.value.extra["record_index"] == 1


def test_a_kafka_batch_with_a_wrapping_time_is_refused() -> None:
    batch = reseal(small_batch(), base_ts=2**63 - 1)
    with pytest.raises(TierlogError) as err:
        decode_batch(batch, LIMITS)
    assert err.value.code is ErrorCode.INVALID_TIMESTAMP


def test_http_produce_is_held_to_the_topic_skew_bound() -> None:
    body = b'{"records": [{"value": "a"}, {"value": "b", "timestamp": %d}]}' % (NOW + 7_200_000)
    args = ("t", 1, topic_config({}), StickyPartitioner(), NOW)
    with pytest.raises(TierlogError) as err:
        plan_json(body, *args)
    assert err.value.code is ErrorCode.INVALID_TIMESTAMP and err.value.extra["record_index"] == 1
    assert "message.timestamp.after.max.ms=3600000" in err.value.message


# -- K3: fetch ------------------------------------------------------------------------------


def test_duplicate_partitions_merge_as_kafka_keys_them() -> None:
    got = merged([("a", 0, "first"), ("b", 1, "x"), ("a", 0, "again"), ("a", 2, "y")])
    assert got == [("a", [(0, "again"), (2, "y")]), ("b", [(1, "x")])]


def test_the_response_budget() -> None:
    config = BrokerConfig(1, "h", 1, "http://h:1", None, "")  # type: ignore[arg-type]
    assert capped_max_bytes(2**31 - 1, config) == 55 * 1024 * 1024
    budget = ResponseBudget(2**31 - 1, config)
    assert budget.limit(2**31 - 1) == 55 * 1024 * 1024
    budget.spend(55 * 1024 * 1024 + 10)  # the first batch may overshoot
    assert budget.limit(1 << 20) == 0  # then nothing more is read
    assert ResponseBudget(1000, config).limit(0) == 0


# -- K8: entries per request -------------------------------------------------------------------


def test_entries_per_request() -> None:
    check_count("CreateTopics", 1000, DataLimits())
    with pytest.raises(TierlogError) as err:
        check_count("CreateTopics", 1001, DataLimits())
    assert err.value.code is ErrorCode.INVALID_REQUEST
    assert "--kafka-max-create-topics" in err.value.message
