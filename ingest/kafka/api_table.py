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
    3: "partition leader epochs (v7+); 13 adds a top-level error code (KIP-1102); a killed "
    "broker stays listed for Kafka's session timeout (9 s), leading nothing",
    8: "9+ carry KIP-848 member epochs",
    9: "8+ fetch for several groups at once",
    10: "one broker per group or transactional id, whoever is asked (see below); 4 batches keys",
    11: "8+ add a reason field (KIP-800)",
    13: "3+ leave a batch of members",
    19: "validate_only supported; no manual replica assignment",
    20: "6 names topics by id",
    21: "DELETE on the topic; a compact-only topic is POLICY_VIOLATION; cross-tier on a "
    "tiered topic; the low watermark is the leader's",
    22: "a transactional id bumps its epoch, fencing older producers (see below)",
    24: "KIP-890: a partition not added refuses transactional produce (INVALID_TXN_STATE); "
    "one added already is answered after a read, unwritten; 4+ are inter-broker only "
    "(Kafka's schema: versions 4+ are used by brokers)",
    26: "answered once PrepareCommit/PrepareAbort is durable, as Kafka answers; markers after",
    28: "offsets applied when the transaction commits",
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
    43: "preferred: the leader hands over once the replica caught up; unclean (1) is never "
    "done (ELIGIBLE_LEADERS_NOT_AVAILABLE); Metadata names a live broker as controller",
    47: "GROUP_SUBSCRIBED_TO_TOPIC for a topic a live member subscribes to",
    29: "the store of the HTTP API and `tierlog acls`; topic, group, cluster; host `*` only",
    30: "as 29; an operation tierlog's ACLs lack (IDEMPOTENT_WRITE...) is INVALID_REQUEST",
    31: "as 29",
    35: "the broker's one data directory; is_future_key always false",
    61: "idempotent producers of a partition led here; no transactions yet",
    50: "users are API key ids",
    51: "users are API key ids (one not a key: RESOURCE_NOT_FOUND); ALTER on the cluster",
    65: "from the transaction coordinator's store; DESCRIBE on the cluster",
    66: "as 65; 1 filters by duration; the lowest live broker id lists them all, others none",
    68: "KIP-848; server assignors uniform (balanced sticky) and range; no regex, no static",
    69: "every group (HTTP and classic members included); no client ids or racks",
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
        "As Kafka defines them (KIP-98, with KIP-890's server-side check). The coordinator's",
        "state (Kafka's TransactionMetadata: producer id and epoch, state, timeout, start,",
        "partitions, the groups' pending offsets) is a row per transactional id in Postgres",
        "(`metadata/txn_rows.py`), changed under a row lock, so every broker can serve",
        "every id. FindCoordinator (key type 1) names one broker per id, the same whoever is",
        "asked, as Kafka does: the live broker ranked first for it by rendezvous hashing",
        "(`ingest/service/txn_placement.py`). librdkafka asks again every second or so; were",
        "the answer the broker asked, its coordinator would move at random, dropping the",
        "requests in flight with each move. Failover, as tested with quixstreams (librdkafka)",
        "on three broker processes: when the coordinator's broker is killed mid-stream,",
        "every survivor names the id's next-ranked live broker, and the client carries on",
        "there with the transaction under way (its state is in Postgres); the ids move back",
        "when the broker is live again. Metadata lists the killed broker for 9 s more, as",
        "Kafka does until its session ends: librdkafka looks a group coordinator it had",
        "cached there up again only while it is listed (librdkafka issue 5511: else",
        "`send_offsets_to_transaction` waits for it for good). AddPartitionsToTxn of",
        "partitions already added is",
        "answered from one read of the row, never from a broker's memory (another broker may",
        "have ended that transaction). A broker that dies after EndTxn leaves the row in",
        "PrepareCommit or PrepareAbort; the client's retry on any broker, or the sweeper every",
        "broker runs (each second; it also aborts transactions past their timeout, bumping the",
        "epoch so the producer is fenced), writes the markers again and completes it. Writing",
        "a marker twice is harmless. EndTxn is answered once its PrepareCommit (PrepareAbort)",
        "is durable, as Kafka answers it; the coordinator writes the markers after, and the",
        "id's next call on that broker waits for them (another broker answers",
        "CONCURRENT_TRANSACTIONS, retriable, until they are written).",
        "",
        "On each partition the leader checks a transactional batch against the transaction",
        "(INVALID_TXN_STATE when the partition was not added, INVALID_PRODUCER_EPOCH for a",
        "fenced epoch) once per transaction: the row it reads names the transaction's",
        "partitions, and those this broker leads take the producer's batches unchecked until",
        "the transaction ends (none is read when the coordinator leads them: AddPartitionsToTxn",
        "tells them). It records the offsets it wrote as an ongoing span, and on EndTxn writes a",
        "control record (Kafka's commit/abort marker) replicated to the ISR, after which the",
        "span is dropped (commit) or kept as aborted (Kafka's `.txnindex`). The last stable",
        "offset is the first offset of the oldest ongoing span (else the high watermark);",
        "a batch written but whose span is not yet recorded holds it at the log end offset",
        "the batch was queued at. A request's partitions ask Postgres at once: their checks",
        "in one query, their spans (and an EndTxn's markers' closings) in one statement (a",
        "transaction when one of them aborts). The steps every transaction takes (its first",
        "AddPartitionsToTxn, AddOffsetsToTxn and TxnOffsetCommit, EndTxn's PrepareCommit)",
        "are one conditional UPDATE each, and",
        "CompleteCommit rides in the statement of the markers' spans on the coordinator's",
        "broker (on its own only after group offsets); the locked path answers only retries",
        "and errors. Those statements go on connections handed out without a pre-ping (a",
        "round trip each): one found dead (Postgres restarted) is replaced and the statement",
        "runs once more, which each of them allows (`metadata/txn_engine.py`).",
        "",
        "Fetch with `isolation_level=1` answers records below the last stable offset with",
        "aborted records left out by the broker (so `aborted_transactions` is empty), and",
        "ListOffsets(latest) answers the last stable offset; with `isolation_level=0` aborted",
        "records are returned. Markers are left out (offsets skip them, as over a compacted",
        "gap), except one an answer ends on: it goes as Kafka's control batch, so clients",
        "(librdkafka moves a consumer's position only past records or control records)",
        "reach the partition's end. HTTP fetches and searches read committed records.",
        "",
        "The Delta table holds committed records only: tiering waits until no transaction is",
        "open in a segment (it never tiers past the last stable offset) and skips aborted",
        "records and markers (each marker also carries a `__tierlog_txn_marker` header), so",
        "Spark's own Delta reader needs no filter, with one exception: a segment of nothing",
        "but aborted records and markers is tiered as its markers alone (a file must hold a",
        "row), and one of aborted records alone as a placeholder row (no key, no value, that",
        "header); a Delta reader drops both by the header. Kafka reads of the cold tier find",
        "no aborted records, whatever their isolation level. Describe (`GET /topics/{name}`)",
        "gives each partition's `last_stable_offset`; the Spark source plans its hot part to",
        "it, so a query of a partition with a transaction open reads up to that offset.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
