"""A quixstreams application counting records per key with exactly-once processing, run
by test_kafka_quix.py as a child process of the `.venv-quix` interpreter (quixstreams pins
an older confluent-kafka than the project's). Not imported by the suite.

    python quix_count_app.py BOOTSTRAP INPUT OUTPUT GROUP STATE_DIR TIMEOUT_MS [DEBUG]

TIMEOUT_MS is both the producer's transaction timeout and the consumer's session timeout:
what a kill -9 of the application leaves behind (its open transaction, its group member)
lasts that long.

DEBUG (to diagnose a run, e.g. "eos,protocol,broker,cgrp") is librdkafka's `debug` for the
application's consumer and producer, logged at quixstreams' DEBUG level.

Each input record (a key) yields {"key", "count"} on OUTPUT: the key's running count, kept
in the application's state (RocksDB, recovered from its changelog topic)."""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    from quixstreams import Application, State

    bootstrap, source, sink, group, state_dir, timeout_ms = sys.argv[1:7]
    debug = {"debug": sys.argv[7]} if len(sys.argv) > 7 else {}  # librdkafka's, to diagnose
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        processing_guarantee="exactly-once",
        auto_offset_reset="earliest",
        state_dir=state_dir,
        auto_create_topics=True,
        commit_interval=0.5,
        # Its transactional.id is random per start (quixstreams' default), so the transaction
        # a kill -9 leaves open ends only by timing out, as in Kafka: seconds rather than 60 s
        # keep the test's wait short without changing what it shows.
        producer_extra_config={"transaction.timeout.ms": int(timeout_ms), **debug},
        # A restarted application's consumer joins a group whose killed member stays in it
        # until its session times out: seconds rather than librdkafka's 45 s, as long as the
        # transaction's timeout above, so the wait after a kill -9 is that one timeout.
        consumer_extra_config={
            "session.timeout.ms": int(timeout_ms),
            "heartbeat.interval.ms": 1000,
            **debug,
        },
        loglevel="DEBUG" if debug else "INFO",
    )
    words = app.topic(source, key_deserializer="str", value_deserializer="str")
    counts = app.topic(sink, key_serializer="str", value_serializer="json")

    def count(value: Any, key: Any, timestamp: int, headers: Any, state: State) -> Any:
        n = int(state.get("count", 0)) + 1
        state.set("count", n)
        return {"key": key, "count": n}

    sdf = app.dataframe(words)
    sdf = sdf.apply(count, stateful=True, metadata=True)
    sdf.to_topic(counts)
    app.run()


if __name__ == "__main__":
    main()
