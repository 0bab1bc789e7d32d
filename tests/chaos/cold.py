"""The cold tier against the final hot log: whatever tiering wrote to the Delta table (through
S3 faults, while compaction rewrote files) is the hot log's records, each offset once."""

from __future__ import annotations

import time
from collections import Counter

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from coldstore.layout import table_uri
from coldstore.object_store import ObjectStoreConfig
from tests.chaos.checker import MAX_REPORTED
from tests.chaos.history import Row
from tests.chaos.workload import TOPIC

SNAPSHOT_ATTEMPTS = 10


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode(errors="replace")


def _read_table(config: ObjectStoreConfig) -> pa.Table | None:
    """The table's current snapshot. The compaction worker runs with no grace period here, so a
    file of the snapshot just loaded can be deleted before it is read: load a newer one, as a
    reader outliving the grace period must."""
    uri = table_uri(config, TOPIC)
    for attempt in range(SNAPSHOT_ATTEMPTS):
        try:
            return DeltaTable(uri, storage_options=config.storage_options()).to_pyarrow_table(
                columns=["partition", "offset", "key", "value"]
            )
        except TableNotFoundError:  # nothing tiered yet: reported as such
            return None
        except FileNotFoundError:
            if attempt == SNAPSHOT_ATTEMPTS - 1:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def cold_agrees(config: ObjectStoreConfig, final: dict[int, list[Row]]) -> list[str]:
    """Violations: a tiered offset held twice, or holding other than the hot log's record
    (partitions missing from `final`, which could not be read, are left out)."""
    table = _read_table(config)
    if table is None:
        return ["cold tier: no Delta table, nothing was tiered (is the tiering worker running?)"]
    hot = {(p, r.offset): (r.key, r.value) for p, rows in final.items() for r in rows}
    problems: list[str] = []
    seen = Counter(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))
    problems += [f"cold tier: {p}:{o} tiered {n} times" for (p, o), n in seen.items() if n > 1]
    for row in table.to_pylist():
        at = (row["partition"], row["offset"])
        if at[0] not in final:
            continue
        cold = (_text(row["key"]), _text(row["value"]))
        if hot.get(at) != cold:
            problems.append(f"cold tier: {at[0]}:{at[1]} holds {cold}, the hot log {hot.get(at)}")
    if not len(table):
        problems.append("cold tier: nothing was tiered (is the tiering worker running?)")
    if len(problems) > MAX_REPORTED:
        problems = [*problems[:MAX_REPORTED], f"... and {len(problems) - MAX_REPORTED} more"]
    return problems
