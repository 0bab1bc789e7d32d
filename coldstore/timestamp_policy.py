"""What tiering does with a record whose timestamp the cold tier cannot hold (issue 24 item 7).

The cold tier's timestamp column must fit Delta's statistics (ISO-8601 text) and Spark's
timestamp type: years 1970 to 9999, the range HTTP produce accepts (logformat's
MAX_TIMESTAMP_MS). A record outside it (a Kafka produce before that path checked, -1 from
an old client) would make the Delta commit fail, and the segment would be retried forever,
stalling its partition's tiering for good.

The policy keeps every record: its timestamp is clamped into the range (below → 0, above →
9999-12-31T23:59:59.999Z) and its original value goes into a header,
`tierlog.original.timestamp` (decimal milliseconds as text), so nothing is lost and the
offsets stay dense. The hot tier keeps the original until retention removes it; the cold
copy differs only in that column and header. Tiering reports each file that needed it (one
log line, a metric)."""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from logformat.schema import CONSUMER_SCHEMA, HEADERS, TIMESTAMP

MIN_WRITABLE_MS = 0
MAX_WRITABLE_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, logformat's MAX_TIMESTAMP_MS
ORIGINAL_TIMESTAMP_HEADER = "tierlog.original.timestamp"
_TS, _HEADERS = 1, 4  # CONSUMER_SCHEMA's column positions


class Clamped(NamedTuple):
    offset: int
    original_ms: int


def clamp_timestamps(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, list[Clamped]]:
    """`batch` (CONSUMER_SCHEMA) with out-of-range timestamps clamped and the originals in a
    header; and which records that was. Untouched (and cheap) when every timestamp fits."""
    ms = batch.column(_TS).view(pa.int64())
    bad = pc.or_(pc.less(ms, MIN_WRITABLE_MS), pc.greater(ms, MAX_WRITABLE_MS))
    if not pc.any(bad).as_py():
        return batch, []
    flags = bad.to_pylist()
    offsets = batch.column(0).to_pylist()
    originals = ms.to_pylist()
    headers = batch.column(_HEADERS).to_pylist()
    clamped: list[Clamped] = []
    for i, is_bad in enumerate(flags):
        if is_bad:
            clamped.append(Clamped(offsets[i], originals[i]))
            note = {"key": ORIGINAL_TIMESTAMP_HEADER, "value": str(originals[i]).encode()}
            headers[i] = [*(headers[i] or []), note]
    fixed = pc.min_element_wise(pc.max_element_wise(ms, MIN_WRITABLE_MS), MAX_WRITABLE_MS)
    columns = list(batch.columns)
    columns[_TS] = fixed.cast(pa.int64()).view(TIMESTAMP)
    columns[_HEADERS] = pa.array(headers, HEADERS)
    return pa.RecordBatch.from_arrays(columns, schema=CONSUMER_SCHEMA), clamped
