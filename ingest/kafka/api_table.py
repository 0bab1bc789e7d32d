"""docs/kafka-apis.md, generated from SUPPORTED: the APIs and versions the listener serves.

    .venv/bin/python -m ingest.kafka.api_table > docs/kafka-apis.md

tests/unit/ingest/kafka/test_kafka_api_table.py fails when the file and SUPPORTED differ.
"""

from __future__ import annotations

from kio.index import load_request_schema

from ingest.kafka.protocol import SUPPORTED

# Why a range starts or stops where it does, where that is not just "what kio has".
NOTES: dict[int, str] = {
    0: "RecordBatch v2 only (v3+); 10+ add KIP-951 leader hints; 13 names topics by id",
    1: "RecordBatch v2 only (v4+); leader epochs fenced (v9+), divergence (v12); 13+ by id",
    2: "current_leader_epoch fenced (v4+); 8+ add KIP-734/1005 timestamps",
    3: "partition leader epochs (v7+); 13 adds a top-level error code (KIP-1102)",
    8: "9+ carry KIP-848 member epochs",
    9: "8+ fetch for several groups at once",
    10: "a transaction key is refused (see below); 4 batches keys",
    11: "8+ add a reason field (KIP-800)",
    13: "3+ leave a batch of members",
    19: "validate_only supported; no manual replica assignment",
    20: "6 names topics by id",
    22: "idempotent producers only: a transactional id is refused (see below)",
    23: "librdkafka asks v2 after a leader change",
    32: "topic and broker resources; no synonyms",
    37: "grow only; no manual replica assignment",
    44: "SET/DELETE on topics; APPEND/SUBTRACT on list configs (cleanup.policy)",
    60: "broker endpoints only (v1's controller endpoint type is refused)",
    17: "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; v0 sends the tokens bare",
    36: "username = key id, password = the API key (SCRAM: its credential set first)",
    15: "Kafka's classic states; a missing group is Dead (6's GROUP_ID_NOT_FOUND not served)",
    16: "4+ filter by state, 5 by type (every group is classic)",
    42: "only while the group has no live member (NON_EMPTY_GROUP)",
    47: "GROUP_SUBSCRIBED_TO_TOPIC for a topic a live member subscribes to",
    29: "the store of the HTTP API and `tierlog acls`; topic, group, cluster; host `*` only",
    30: "as 29; an operation tierlog's ACLs lack (IDEMPOTENT_WRITE...) is INVALID_REQUEST",
    31: "as 29",
    35: "the broker's one data directory; is_future_key always false",
    61: "idempotent producers of a partition led here; no transactions yet",
    50: "users are API key ids; Alter (51) is not served: a credential derives from its key",
    65: "from the transaction coordinator's store; DESCRIBE on the cluster",
    66: "as 65; 1 filters by duration",
    68: "KIP-848; server assignors uniform (balanced sticky) and range; no regex, no static",
    69: "every group (HTTP and classic members included); no client ids or racks",
}
TRANSACTIONAL = {
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
}


def api_name(key: int) -> str:
    for version in range(20):
        try:
            return str(load_request_schema(key, version).__name__).removesuffix("Request")
        except Exception:  # kio names no schema at this version: try the next
            continue
    return f"API {key}"


def render() -> str:
    lines = [
        "# Kafka APIs served by the listener",
        "",
        "Generated from `SUPPORTED` in `ingest/kafka/protocol.py` by",
        "`python -m ingest.kafka.api_table > docs/kafka-apis.md`; a test keeps the two equal.",
        "",
        "| API | Key | Versions | Notes |",
        "| --- | ---: | --- | --- |",
    ]
    for key, (lo, hi) in sorted(SUPPORTED.items()):
        lines.append(f"| {api_name(key)} | {key} | {lo}-{hi} | {NOTES.get(key, '')} |")
    lines += [
        "",
        "A request in a version outside these ranges is answered UNSUPPORTED_VERSION in its own",
        "version (in the top-level error code and in every topic, partition or resource entry",
        "the request named), as Kafka's `getErrorResponse` does; ApiVersions answers an unknown",
        "version as v0 with the list above (KIP-511). A version no Kafka release still defines",
        "(so no schema exists to answer in) and an API key not in the table close the connection,",
        "with a log line on the broker.",
        "",
        "## Transactions",
        "",
        "Not supported. The transactional APIs ("
        + ", ".join(f"{name} ({key})" for key, name in sorted(TRANSACTIONAL.items()))
        + ") are absent from ApiVersions. Clients look for a transaction coordinator",
        "regardless, so FindCoordinator for a transaction key and InitProducerId with a",
        "transactional id answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the error librdkafka and",
        "the Java clients treat as fatal at once, with a message saying why; librdkafka's",
        "`init_transactions()` then fails immediately (not after its timeout) with:",
        "",
        "```text",
        "Failed to find transaction coordinator: 127.0.0.1:9092/1: Broker: Transactional Id",
        "authorization failed: tierlog does not support Kafka transactions: unset",
        "transactional.id (an idempotent producer, enable.idempotence=true, still keeps",
        "retries from duplicating records)",
        "```",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
