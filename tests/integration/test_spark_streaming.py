"""spark.readStream.format("tierlog") over a growing topic: real brokers, a tiering worker
moving the hot/cold seam under the query, and a restart from the checkpoint."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from spark_tables import report
from tests.integration.cluster import wait_for
from tests.integration.s3 import moto_s3_fixture  # noqa: F401
from tests.integration.test_spark_source import (  # noqa: F401  (fixtures)
    LiveTopic,
    live_fixture,
    rows_of,
)


class Sink:
    """foreachBatch target keyed by batch id: a batch Spark replays after a restart replaces
    its first delivery, as an idempotent sink would."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[Any, ...]]] = {}

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.batches[batch_id] = rows_of(df)

    def rows(self) -> list[tuple[Any, ...]]:
        return [r for b in sorted(self.batches) for r in self.batches[b]]


def _start(
    spark: SparkSession, live: LiveTopic, sink: Sink, checkpoint: Path, **trigger: Any
) -> StreamingQuery:
    stream = (
        spark.readStream.format("tierlog")
        .options(**live.options(maxRecordsPerTrigger="60", reportDir=str(checkpoint.parent)))
        .load(live.name)
    )
    return (
        stream.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def _delivered(q: StreamingQuery, sink: Sink, n: int) -> bool:
    if q.exception() is not None:
        raise AssertionError(f"the query failed: {q.exception()}")
    return len(sink.rows()) >= n


def test_a_stream_delivers_every_record_once_in_order_across_a_restart(
    spark: SparkSession, live: LiveTopic, tmp_path: Path
) -> None:
    for _ in range(2):
        for p in (0, 1):
            live.produce(p, 40)
    for p in (0, 1):
        live.tier_until(p, 40)  # history starts in the cold tier
    sink, checkpoint = Sink(), tmp_path / "checkpoint"
    q = _start(spark, live, sink, checkpoint, processingTime="500 milliseconds")
    try:
        for _ in range(3):  # the topic grows, and tiering moves the seam, while it runs
            for p in (0, 1):
                live.produce(p, 25)
            live.worker.run_once()
            time.sleep(0.5)
        wait_for("live records delivered", lambda: _delivered(q, sink, len(live.expected)), 120)
    finally:
        q.stop()
    first_run = len(sink.batches)
    assert first_run >= 4  # maxRecordsPerTrigger split the backlog into several batches

    for p in (0, 1):
        live.produce(p, 30)  # while no query runs
    live.worker.run_once()
    q = _start(spark, live, sink, checkpoint, availableNow=True)  # resumes from the checkpoint
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()

    rows = sink.rows()
    keys = [(p, o) for p, o, *_ in rows]
    assert sorted(keys) == sorted(live.expected)
    assert len(set(keys)) == len(keys), "a record was delivered twice"
    for part in (0, 1):
        offsets = [o for p, o in keys if p == part]
        assert offsets == sorted(offsets), f"partition {part} out of order"
    for p, o, ts, key, value, headers in rows:
        assert (key, value, ts, headers) == live.expected[(p, o)]
    assert len(sink.batches) > first_run
    # history came from cold files, live records from the brokers
    plans = [e for e in report.read(tmp_path) if e["kind"] == "plan"]
    assert any(p["files_planned"] for p in plans) and any(p["hot"] for p in plans)
