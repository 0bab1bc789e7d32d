"""Make the manifest match the table when Postgres lost the manifest step of a Delta commit.

Every job changes the Delta table first and the manifest second (compaction/jobs.py). When
the second step is lost with Postgres (a kill under synchronous_commit=off, a failover to an
asynchronous standby), committed rows name files the table has dropped, and a rewrite that
plans them would fail at every pass ("... is not a live file"). Before a rewrite runs, the
dropped files are settled as the lost step would have:

- no successor in the table (retention, a key compaction that emptied its range, an erasure
  that removed every row of a file): the rows are retired (deleted after the grace period);
- a rewrite's output the table holds but no row names (its staging insert was lost too): the
  output is given rows covering the dropped rows' range, swapped in as the rewrite would have.

Anything else (a live file whose row is in another state, an output that is not inside one
run of dropped rows, an object missing from the bucket) is logged and the rewrite waits:
retiring rows there could leave the manifest a hole where the table holds data.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from coldstore.delta_actions import DeltaFile
from coldstore.delta_table import DeltaTopicTable
from coldstore.object_store import ObjectStore
from compaction.manifest_ops import COMPACTED_MARK, ERASED_MARK, MERGED_MARK, CompactionManifest
from compaction.target import Target
from metadata.cold_manifest import ColdManifest
from metadata.types import ColdFile, FileSpec


class PartitionJobs(Protocol):
    """What settling needs of compaction/jobs.py's PartitionJobs (which calls it: a
    Protocol, so the two modules do not import each other)."""

    ops: CompactionManifest
    manifest: ColdManifest
    store: ObjectStore

    def table(self, t: Target) -> DeltaTopicTable: ...

    def store_root(self, t: Target) -> str: ...

    def grace_ms(self, t: Target) -> int: ...


log = logging.getLogger("tierlog.compaction")
_MARKS = (MERGED_MARK, COMPACTED_MARK, ERASED_MARK)


def retire_dropped(jobs: PartitionJobs, t: Target, planned: Sequence[ColdFile]) -> bool:
    """Whether some of `planned` (committed rows) are no longer in the table; if so the
    partition's dropped rows are settled (see above) and the caller skips its rewrite: the
    next pass plans from the corrected manifest."""
    table = jobs.table(t)
    live = [f for f in table.files() if f.partition == t.partition]
    paths = {f.path for f in live}
    if all(table.relpath(f.object_key) in paths for f in planned):
        return False
    dropped = [f for f in jobs.manifest.files(t.tp) if table.relpath(f.object_key) not in paths]
    root = jobs.store_root(t)
    states = jobs.ops.key_states(t.tp, [f"{root}/{f.path}" for f in live])
    strays = [f for f in live if states.get(f"{root}/{f.path}") != "committed"]
    ctx = {"topic": t.topic, "partition": t.partition, "files": len(dropped)}
    if any(f"{root}/{f.path}" in states for f in strays) or not _settle(jobs, t, strays, dropped):
        log.error(
            "the table holds cold files with no committed row; rewrites of the range wait",
            extra={**ctx, "files_without_row": sorted(f.path for f in strays)[:10]},
        )
        return True
    log.warning(
        "settled cold files the table had already dropped",
        extra={**ctx, "adopted": len(strays)},
    )
    return True


def _settle(
    jobs: PartitionJobs, t: Target, outputs: list[DeltaFile], dropped: list[ColdFile]
) -> bool:
    """Retire `dropped` runs without an output; give each run's outputs rows tiling the run
    (as PartitionJobs._rewrite cuts them) and swap them in. False, changing nothing, unless
    every output is a rewrite's file, with stats, in the bucket, inside one run."""
    runs: list[list[ColdFile]] = []
    for row in sorted(dropped, key=lambda r: r.base_offset):
        if runs and runs[-1][-1].last_offset + 1 == row.base_offset:
            runs[-1].append(row)
        else:
            runs.append([row])
    plan = [(run, _inside(outputs, run[0].base_offset, run[-1].last_offset)) for run in runs]
    if sum(len(outs) for _, outs in plan) != len(outputs):
        return False
    root = jobs.store_root(t)
    for f in outputs:
        if not any(m in f.path for m in _MARKS) or f.records is None:
            return False
        if jobs.store.head(f"{root}/{f.path}") != f.size:
            return False
    grace, version = jobs.grace_ms(t), jobs.table(t).version()
    for run, outs in plan:
        if not outs:
            jobs.ops.retire([r.id for r in run], grace)
            continue
        starts = [run[0].base_offset] + [int(f.min_offset or 0) for f in outs[1:]]
        ends = [s - 1 for s in starts[1:]] + [run[-1].last_offset]
        ids = [
            jobs.ops.stage(t.tp, s, e, _spec(f"{root}/{f.path}", f))
            for f, s, e in zip(outs, starts, ends, strict=True)
        ]
        jobs.ops.swap(ids, [r.id for r in run], version, grace, new_states=("copy_started",))
    return True


def _inside(outputs: list[DeltaFile], first: int, last: int) -> list[DeltaFile]:
    inside = [
        f
        for f in outputs
        if f.min_offset is not None
        and f.max_offset is not None
        and first <= f.min_offset <= f.max_offset <= last
    ]
    return sorted(inside, key=lambda f: int(f.min_offset or 0))


def _spec(key: str, f: DeltaFile) -> FileSpec:
    return FileSpec(key, f.size, int(f.records or 0), f.min_timestamp or 0, f.max_timestamp or 0)
