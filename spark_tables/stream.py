"""spark.readStream.format("tierlog"): history from the cold files, then live records from
the brokers up to the high watermark (docs/design.md §6).

The Spark offset is {"<partition>": next offset to read, ...}, Kafka's per-partition form;
Spark checkpoints it, so a restarted query resumes exactly where its last committed batch
ended. A batch covers [start, end) per partition and is planned when it runs (scan.py), so a
replayed batch reads the same records wherever they live by then. The high watermark only
moves forward and nothing below it ever changes, so batches never overlap or leave gaps.

Without brokerUrl the stream follows the cold tier alone: each batch ends at the cold end.
Partitions added to the topic join from their earliest offset. maxRecordsPerTrigger caps a
batch (split across partitions in proportion to their backlog); Trigger.AvailableNow reads
up to the ends seen when the query starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from spark_tables import report
from spark_tables.columns import OutputConverter
from spark_tables.execute import read_piece
from spark_tables.options import EARLIEST, SourceOptions
from spark_tables.scan import LogEnds, log_ends, resolve, stream_plan

Offsets = dict[str, int]


class TierlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.live = opts.broker_url is not None
        self.target: Offsets | None = None  # Trigger.AvailableNow: stop here
        self.latest: Offsets | None = None  # the ends seen by the last latestOffset()

    def _ends(self) -> dict[int, LogEnds]:
        ends = log_ends(self.opts, self.live)
        if self.opts.partitions is not None:
            ends = {p: e for p, e in ends.items() if p in self.opts.partitions}
        return ends

    def initialOffset(self) -> Offsets:
        return {
            str(p): resolve(self.opts.starting_offsets, p, e.start, e.end, EARLIEST)
            for p, e in sorted(self._ends().items())
        }

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_records_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {str(p): e.end for p, e in self._ends().items()}

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        ends = self._ends()
        self.latest = {str(p): e.end for p, e in ends.items()}
        latest = dict(start)
        for p, e in ends.items():
            key = str(p)
            begin = int(start.get(key, e.start))  # a new partition joins from its start
            end = e.end if self.target is None else min(e.end, self.target.get(key, begin))
            latest[key] = max(begin, end)
            if key not in start:
                start = {**start, key: begin}
        if isinstance(limit, ReadMaxRows):
            latest = cap(start, latest, limit.max_rows)
        return latest

    def reportLatestOffset(self) -> Offsets | None:
        return self.latest  # for progress reports: no second round trip per trigger

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        plan = stream_plan(self.opts, start, end, self.live)
        report.write(
            self.opts.report_dir,
            {**plan.report(), "topic": self.opts.topic, "start": start, "end": end},
        )
        return list(plan.pieces)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_piece(self.opts, partition, OutputConverter(self.schema, self.opts.topic))

    def commit(self, end: Offsets) -> None:
        pass  # nothing to release: the log keeps its records whatever we have read


def cap(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """Move each partition at most its share of `max_rows` past `start` (shares in
    proportion to backlog, at least 1 each while any is left)."""
    backlog = {k: max(0, v - int(start.get(k, v))) for k, v in latest.items()}
    total = sum(backlog.values())
    if total <= max_rows:
        return latest
    out: dict[str, Any] = {}
    for k, v in latest.items():
        lag = backlog[k]
        share = max(1, lag * max_rows // total) if lag else 0
        out[k] = int(start.get(k, v)) + min(lag, share)
    return out
