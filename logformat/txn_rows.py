"""Which rows of a record batch transactions hide: markers (control records) and the offsets
of aborted spans. One rule for every reader of the log: the broker's reads
(ingest/service/txn_log.py) and tiering, which keeps them out of the Delta table
(tiering/txn_filter.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Every marker carries this header: a marker whose span never reached Postgres (its leader
# lost leadership after followers copied it, before its append was acknowledged) is still
# recognised and left out.
MARKER_HEADER = "__tierlog_txn_marker"


def marker_rows(batch: pa.RecordBatch) -> np.ndarray:
    """Rows that are transaction markers (they carry MARKER_HEADER). Column 4: headers, in
    both the log's and the consumer's schema."""
    found = np.zeros(batch.num_rows, bool)
    headers = batch.column(4)
    if headers.null_count == len(headers):
        return found
    hits = pc.equal(pc.list_flatten(headers).field(0), MARKER_HEADER).fill_null(False)
    if pc.any(hits).as_py():
        parents = pc.list_parent_indices(headers).to_numpy()
        found[parents[hits.to_numpy(zero_copy_only=False)]] = True
    return found


def in_spans(offsets: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Which `offsets` fall in one of `spans` ([first, last] ranges, sorted, disjoint)."""
    if not spans:
        return np.zeros(len(offsets), bool)
    # spans never overlap: each offset's candidate is the last span starting at or before it
    firsts, lasts = np.array(spans, np.int64).T
    at = np.searchsorted(firsts, offsets, side="right") - 1
    hit: np.ndarray = (at >= 0) & (offsets <= lasts[np.maximum(at, 0)])
    return hit
