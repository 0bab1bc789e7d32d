"""Offsets by timestamp in the cold tier (Kafka's ListOffsets, remote part).

The manifest's min/max timestamps pick the first file (in offset order) that reaches the
timestamp; that file's row-group statistics pick the first row group that does; only that
row group is read, and its first row at or after the timestamp is the answer. Rows below
the cold range's start (a DeleteRecords start inside a file) are no answer.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from fetch.cold.cold_caches import ColdCaches
from metadata.types import TopicIdPartition


async def offset_for_timestamp(
    caches: ColdCaches, tp: TopicIdPartition, timestamp: int
) -> int | None:
    index, footers, _, groups = caches
    rng = await index.bounds(tp)  # its start: the log start DeleteRecords set, if higher
    if rng is None:
        return None
    f = await index.first_reaching(tp, timestamp)
    while f is not None:
        if f.max_timestamp < timestamp or f.last_offset < rng.start:  # older, or deleted
            f = await index.file_at(tp, max(f.last_offset + 1, rng.start))
            continue
        layout = await footers.get(f.object_key, f.size_bytes)
        for g in layout.groups:
            if g.max_timestamp is not None and g.max_timestamp < timestamp:
                continue  # statistics say every row is older
            table = await groups.get(f.object_key, layout, g.number)
            stamps = table.column(1).cast(pa.int64()).to_numpy()
            offsets = table.column(0).cast(pa.int64()).to_numpy()
            hits = np.flatnonzero((stamps >= timestamp) & (offsets >= rng.start))
            if hits.size:
                return int(offsets[int(hits[0])])
        # The manifest promised a newer record than the file holds (it never should): go on
        # with the files after it rather than answer wrongly.
        f = await index.file_at(tp, f.last_offset + 1)
    return None
