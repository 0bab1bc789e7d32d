"""Leader epochs on the Kafka side (KIP-101/279/320): fencing a client's view of the
leader, the epoch each fetched batch carries, divergence, and OffsetForLeaderEpoch.

The partition's leader-epoch cache (ingest/log/epoch_cache.py) is the same one replication
fences and truncates with; this module answers it with Kafka's rules (LeaderEpochFileCache's
endOffsetFor), which differ from the replica path's at the edges: an epoch newer than the
latest is unknown, and one older than the oldest ends where the oldest begins.
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from kio.schema.errors import ErrorCode as KafkaError

from cluster.read_contract import FetchResult
from ingest.service.partitions import Epochs, Partition, latest_epoch, leader_epochs, log_end
from logformat.errors import ErrorCode, TierlogError

NO_EPOCH = -1


class EpochEnd(NamedTuple):
    epoch: int
    end_offset: int


UNDEFINED = EpochEnd(NO_EPOCH, -1)


def fence(state: Partition, current_leader_epoch: int) -> KafkaError | None:
    """A client's view of the leader epoch: older is fenced, newer is not yet known here
    (it retries after a metadata refresh); -1 skips the check."""
    if current_leader_epoch < 0 or current_leader_epoch == state.leader_epoch:
        return None
    if current_leader_epoch < state.leader_epoch:
        return KafkaError.fenced_leader_epoch
    return KafkaError.unknown_leader_epoch


def end_offset_for(entries: Epochs, log_end: int, epoch: int) -> EpochEnd:
    """Kafka's endOffsetFor over a cache's (epoch, start offset) entries: (the largest epoch
    <= `epoch`, the offset where it ended)."""
    if epoch < 0 or not entries:
        return UNDEFINED
    if epoch == entries[-1][0]:
        return EpochEnd(epoch, log_end)
    later = [start for e, start in entries if e > epoch]
    if not later:
        return UNDEFINED  # newer than any epoch this log has seen
    earlier = [e for e, _ in entries if e <= epoch]
    return EpochEnd(earlier[-1] if earlier else epoch, later[0])


def epoch_end(state: Partition, epoch: int) -> EpochEnd:
    return end_offset_for(leader_epochs(state), log_end(state), epoch)


def diverging(state: Partition, last_fetched_epoch: int, fetch_offset: int) -> EpochEnd | None:
    """Where a consumer's log diverges from ours (Fetch v12+'s lastFetchedEpoch), or None.
    OFFSET_OUT_OF_RANGE when the epoch is beyond what the cache can answer."""
    if last_fetched_epoch < 0:
        return None
    found = epoch_end(state, last_fetched_epoch)
    if found == UNDEFINED:
        raise TierlogError(
            ErrorCode.OFFSET_OUT_OF_RANGE, f"leader epoch {last_fetched_epoch} is not known"
        )
    if found.epoch < last_fetched_epoch or found.end_offset < fetch_offset:
        return found
    return None


def epoch_of(entries: Epochs, offset: int) -> tuple[int, int | None]:
    """(the epoch whose records start at or before `offset`, the offset where that epoch
    ends or None while it is the latest); -1 below the oldest epoch the cache keeps."""
    epoch: int = NO_EPOCH
    for e, start in entries:
        if start > offset:
            return epoch, start
        epoch = e
    return epoch, None


def epoch_at(state: Partition, offset: int) -> tuple[int, int | None]:
    # The common case, a consumer in the leader's own epoch, needs no index read: that epoch
    # began at or before epoch_start_offset (the log end when this broker began leading).
    if state.leader_epoch == latest_epoch(state) and offset >= state.epoch_start_offset:
        return state.leader_epoch, None
    return epoch_of(leader_epochs(state), offset)


def within_epoch(got: FetchResult, end: int | None) -> FetchResult:
    """The fetched records before `end` (where the next epoch starts): a Kafka batch has one
    leader epoch, so a read that crossed an epoch stops there and the next fetch goes on."""
    if end is None or got.next_offset <= end:
        return got
    keep = pc.sum(pc.less(got.batch.column(0), pa.scalar(end, pa.int64()))).as_py() or 0
    return got._replace(batch=got.batch.slice(0, keep), next_offset=end)
