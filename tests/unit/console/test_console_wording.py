"""The console's wording where issue 27 found it confusing. Tiering lag that adds up (S8):
records waiting in a partition's open segment are counted in the record lag but not in the
sealed bytes and age, so the console says which of the lag's records wait for their segment
to roll instead of showing "2" beside "0 B, 0 s". A refusal by the ACLs says what it means
(S13)."""

from __future__ import annotations

from typing import Any

from console.cluster_api import ConsoleApiError
from console.render import render_fragment
from console.topic_details import summary
from ingest.log.log_types import SegmentInfo
from ingest.service.partition_stats import open_segment_records


def _seg(base: int, end: int, sealed: bool) -> SegmentInfo:
    return SegmentInfo(base, end, 100 * (end - base), sealed, f"{base}.log", 0, 0)


def test_the_open_segments_share_of_the_lag() -> None:
    segs = [_seg(0, 10, True), _seg(10, 14, True), _seg(14, 16, False)]
    assert open_segment_records(segs, 16, 10) == 2  # 10-13 sealed, waiting; 14-15 open
    assert open_segment_records(segs, 16, 16) == 0  # (a tiered end past the HW: none)
    assert open_segment_records(segs, 15, 0) == 1  # only up to the high watermark
    assert open_segment_records(segs[:2], 14, 10) == 0  # no open segment
    assert open_segment_records([], 0, None) == 0


def _partition(lag: int, open_records: int) -> dict[str, Any]:
    return {
        "partition": 0, "leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1],
        "log_start_offset": 0, "high_watermark": 2, "log_end_offset": 2,
        "hot": {"start": 0, "end": 2}, "cold": None, "tiering_lag": lag, "hot_bytes": 200,
        "cold_bytes": 0, "tiering_lag_bytes": 0, "tiering_lag_seconds": 0.0,
        "tiering_lag_open_records": open_records,
    }  # fmt: skip


def test_the_console_says_which_lagging_records_wait_for_a_roll() -> None:
    topic = {
        "name": "t",
        "replication_factor": 1,
        "configs": {"remote.storage.enable": "true"},
        "partitions": [_partition(2, 2)],
    }
    assert summary(topic)["lag_records"] == 2 and summary(topic)["lag_open_records"] == 2
    html = render_fragment("topics/_partitions.html", {"topic": topic})
    assert "2 <span" in html and "(2 waiting for their segment to roll)" in html
    topic["partitions"] = [_partition(3, 0)]  # sealed and waiting: no such note
    assert "waiting for their segment to roll)" not in render_fragment(
        "topics/_partitions.html", {"topic": topic}
    )


def test_a_refusal_by_the_acls_says_what_it_means() -> None:
    """Issue 27 S13: a key with few rights meets a 403; the console says the key is valid but
    its ACLs do not allow this, and what to do, rather than only the error's name."""
    denied = ConsoleApiError("TOPIC_AUTHORIZATION_FAILED", "User:app may not describe t", 403)
    html = render_fragment("_error.html", {"error": denied})
    assert "TOPIC_AUTHORIZATION_FAILED" in html and "User:app may not describe t" in html
    assert "the cluster's ACLs do not allow its principal this" in html
    other = ConsoleApiError("INVALID_CONFIG", "bad", 400)
    assert "ACLs" not in render_fragment("_error.html", {"error": other})
