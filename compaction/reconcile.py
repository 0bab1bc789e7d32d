"""Planned files the table no longer holds: the manifest step of a Delta commit was lost.

Every job changes the Delta table first and the manifest second (compaction/jobs.py). When
the second step is lost with Postgres (a kill under synchronous_commit=off, a failover to an
asynchronous standby) after a commit that removed files without successors (retention, a key
compaction that emptied its range, an erasure that removed every row of a file), their rows
stay committed while the table has dropped them, and a rewrite that plans them would fail at
every pass ("... is not a live file"). Their removal is finished here as the job would have
(retired after the grace period), before any rewrite of them is tried.

Rows are retired only when every live file of the partition has a committed manifest row: a
live file without one is a rewrite's output whose staging row was lost too (or a tiering
commit not yet marked tiered), and retiring the rows it replaced would leave the manifest a
hole where the table holds data. That case is logged and the rewrite skipped; adopting a
file no row names is left to an operator.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from metadata.types import ColdFile

if TYPE_CHECKING:
    from compaction.jobs import PartitionJobs, Target

log = logging.getLogger("tierlog.compaction")


def retire_dropped(jobs: PartitionJobs, t: Target, planned: Sequence[ColdFile]) -> bool:
    """Whether some of `planned` (committed rows) are no longer in the table; those are
    retired (unless the table holds files no committed row names). The caller then
    skips its rewrite: the next pass plans from the corrected manifest."""
    table = jobs.table(t)
    live = [f for f in table.files() if f.partition == t.partition]
    paths = {f.path for f in live}
    dropped = [f for f in planned if table.relpath(f.object_key) not in paths]
    if not dropped:
        return False
    root = jobs.store_root(t)
    unknown = jobs.ops.uncommitted_keys(t.tp, [f"{root}/{f.path}" for f in live])
    ctx = {"topic": t.topic, "partition": t.partition, "files": len(dropped)}
    if unknown:
        log.error(
            "the table holds cold files with no committed row; rewrites of the range wait",
            extra={**ctx, "unknown": sorted(unknown)[:10]},
        )
        return True
    jobs.ops.retire([f.id for f in dropped], jobs.grace_ms(t))
    log.warning("retired cold files the table had already dropped", extra=ctx)
    return True
