"""What `tierlog dev` says once it is up (issue 27 S14, item 1): a short block with one line
per service, the new-topic defaults that send records to S3 within seconds, and the brokers
it starts with those defaults (none with --kafka-defaults)."""

from __future__ import annotations

from pathlib import Path

from tierlog.devstack.banner import (
    DEV_TOPIC_DEFAULTS,
    TITLE,
    DevUrls,
    banner_lines,
    describe_defaults,
    render,
)
from tierlog.devstack.dev import _broker, _NodeArgs

ENV = {
    "TIERLOG_S3_ENDPOINT": "http://127.0.0.1:8333",
    "TIERLOG_S3_BUCKET": "tierlog",
    "TIERLOG_SCHEMA_REGISTRY_URL": "http://127.0.0.1:8080/schema-registry",
}
URLS = DevUrls(
    ["http://127.0.0.1:8080"], ["127.0.0.1:9092"], "http://127.0.0.1:8090", "http://127.0.0.1:8070"
)
ENV_FILE = Path("/work/.tierlog/dev.env")


def test_the_banner_is_a_short_block_of_one_line_per_service() -> None:
    lines = banner_lines(
        ENV, URLS, ["tiering", "compaction"], describe_defaults(DEV_TOPIC_DEFAULTS), ENV_FILE
    )
    text = render(lines)
    block = text.strip("\n").splitlines()
    assert block[1] == TITLE and block[0] == block[-1] and set(block[0]) == {"─"}
    assert all(line.startswith("  ") and len(line) <= 140 for line in block[2:-1])
    for expected in (
        "web console at http://127.0.0.1:8070",
        "brokers at http://127.0.0.1:8080 (open, no auth: loopback only)",
        "Kafka clients: 127.0.0.1:9092; librdkafka clients (kcat) take -X "
        "partitioner=murmur2_random",
        "Schema Registry at http://127.0.0.1:8080/schema-registry (every broker serves it)",
        "fetch node at http://127.0.0.1:8090",
        "S3 at http://127.0.0.1:8333 bucket tierlog",
        "workers: tiering, compaction",
        "new topics: segment.bytes=1048576, segment.ms=5000, so records reach S3 within seconds",
        "set -a; . /work/.tierlog/dev.env; set +a",
        "data in /work/.tierlog; Ctrl-C stops everything",
    ):
        assert sum(expected in line for line in lines) == 1, expected
    assert len(text) < 1200  # not the ~600-character single line it was, nor a wall


def test_the_banner_names_the_admin_key_and_kafkas_defaults_when_asked() -> None:
    lines = banner_lines({**ENV, "TIERLOG_API_KEY": "tlk_ab_cd"}, URLS, ["tiering"], None, ENV_FILE)
    assert any("admin key (User:admin, a super user): tlk_ab_cd" in line for line in lines)
    assert "new topics: Kafka's defaults (segment.bytes 1 GiB, segment.ms 7 days)" in lines


def test_dev_brokers_get_the_small_segment_defaults_unless_kafkas_are_asked_for() -> None:
    small = _broker(1, 1, 8080, Path("/d"), _NodeArgs("INFO", False, DEV_TOPIC_DEFAULTS))
    assert " ".join(small).endswith(
        "--topic-default segment.bytes=1048576 --topic-default segment.ms=5000"
    )
    kafka = _broker(1, 1, 8080, Path("/d"), _NodeArgs("INFO", False, ()))
    assert "--topic-default" not in kafka
