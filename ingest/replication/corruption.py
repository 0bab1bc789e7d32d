"""Corrupt frames found on this broker's disk: never served, counted, and repaired.

Every read that serves a client, a follower, a peer or the tiering worker checks each frame's
CRC (ingest/log/log_read.py, and `check_segment` for whole sealed segments). What fails is
reported here, and the replica (leader or follower) remembers the offset (`repair_from`):

- frames are the same bytes on every replica, so it puts that frame back in place from the
  first peer holding a whole copy of the same frame (frame_repair.py: the leader, the ISR,
  then replicas out of the ISR), cutting nothing, within a second (ReplicaManager.heal_offline);
- a follower whose leader holds a whole frame there that is other bytes (the copies were
  compacted apart) truncates below it instead and fetches the rest again (`repair`; below the
  high watermark only once it is out of the ISR);
- a leader that found no whole copy answers KAFKA_STORAGE_ERROR for the bad frame (clients
  retry, fetch nodes fail over to an in-sync follower, followers append nothing) and hands
  leadership to an in-sync replica; a follower then, it keeps trying to put the frame back.
  With no in-sync replica to take it, it keeps leading (`no_taker`): a committed bad frame
  is then a loss, reported once (and said again if a copy turns up later and repairs it).
"""

from __future__ import annotations

import logging
import mmap

from ingest.log.log_read import CorruptLogError
from ingest.log_throttle import LogThrottle
from ingest.replication.partition import Partition, Role
from logformat.frame import first_corrupt_offset

log = logging.getLogger("tierlog.corruption")

# A corrupt frame is read again and again: say so once in a while.
_THROTTLE = LogThrottle(every_s=10.0)


def report(state: Partition, err: CorruptLogError) -> None:
    """A read of `state`'s log met a corrupt frame (the read itself fails with `err`)."""
    state.metrics.corrupt_frames.labels(state.topic, str(state.partition)).inc()
    # Remembered in either role: a leader repairs as soon as it is a follower, before a
    # preferred-leader move could hand the partition back to its still-corrupt copy.
    pending = state.repair_from
    state.repair_from = err.offset if pending is None else min(pending, err.offset)
    if state.role is Role.LEADER:
        state.handoff_wanted = True  # unless a peer's copy puts it back first
    skipped = _THROTTLE.allow((state.topic_id, state.partition, err.offset))
    if skipped is None:
        return
    if err.offset in state.lost_frames:
        then = "; no peer holds a whole copy: serving the rest"
    else:
        then = "; putting it back from a peer's copy"
    log.error(
        "corrupt frame on disk, not served" + then,
        extra={
            "topic": state.topic,
            "partition": state.partition,
            "offset": err.offset,
            "partition_role": state.role.value,
            "error": err.message,
            "repeats_not_logged": skipped,
        },
    )


def no_taker(state: Partition) -> None:
    """A corrupt leader's hand-off found no live in-sync replica to take the partition.

    Kafka's rules, which tierlog keeps: no unclean election (a replica out of the ISR may lack
    committed records), and a leader keeps its partition while no in-sync replica can take it.
    While the bad frame is above the high watermark an in-sync replica may still come (the
    hand-off is tried again). Below it, the frame is committed and this leader was its only
    in-sync copy, and no replica reached held a whole copy to put back (frame_repair.py,
    tried again every second): that is a loss, said once per frame (log and metric), and
    said again should a copy turn up and repair it; the leader goes on
    serving every whole frame, before and after it, and never the bad one. Followers out of
    the ISR cannot fetch past it, so they stay out (the partition stays under-replicated)."""
    at = state.repair_from
    if at is None or state.role is not Role.LEADER or at >= state.high_watermark:
        return
    if any(r != state.me for r in state.isr):
        return  # an in-sync replica that is not live now holds it: it may come back
    if at in state.lost_frames:
        return
    state.lost_frames.add(at)
    state.metrics.corrupt_lost.labels(state.topic, str(state.partition)).inc()
    # What each follower was last seen to hold: one past the bad frame still holds it whole
    # (its copy is an operator's only way back).
    held = {r: p.leo for r, p in state.followers.items()}
    log.error(
        "committed frame lost: its only in-sync copy is corrupt, no replica reached holds a"
        " whole copy and no in-sync replica can take the partition; serving every whole frame",
        extra={
            "topic": state.topic,
            "partition": state.partition,
            "offset": at,
            "high_watermark": state.high_watermark,
            "isr": state.isr,
            "follower_log_end_offsets": held,
        },
    )


def repair(state: Partition) -> bool:
    """Before a follower fetches: when its leader's whole copy of its corrupt frame is other
    bytes (frame_repair.Outcome.REFETCH), cut its log below the frame, so the fetch asks the
    leader for it (and everything after it) again. False: do not fetch yet.

    A follower still in the ISR never cuts below its high watermark: elected meanwhile (its
    leader failing over), it would lose committed records, as a chaos run did (seed 2626:
    offsets 117-392 of a partition, read by consumers, gone). It stops fetching instead, so its
    leader drops it from the ISR by replica lag, and cuts once metadata says it is out."""
    at = state.repair_from
    if at is None or state.role is not Role.FOLLOWER:
        return True
    if at >= state.log.log_end_offset:  # cut meanwhile (a divergence): nothing to repair
        state.repair_from, state.refetch_wanted = None, False
        return True
    if not state.refetch_wanted:
        return True  # put back in place from a peer's copy (frame_repair.py), or kept unserved
    if at < state.high_watermark and state.me in state.isr:
        return False  # out of the ISR first (see above)
    state.repair_from, state.refetch_wanted = None, False
    try:
        state.truncate_to(at)
    except Exception:  # e.g. the log is offline: leave the bad frame unserved, try again later
        state.repair_from, state.refetch_wanted = at, True
        log.exception(
            "could not truncate below a corrupt frame",
            extra={"topic": state.topic, "partition": state.partition, "offset": at},
        )
        return False
    state.metrics.corrupt_repairs.labels(state.topic, str(state.partition)).inc()
    log.warning(
        "truncated below a corrupt frame to fetch it again from the leader",
        extra={
            "topic": state.topic,
            "partition": state.partition,
            "offset": at,
            "log_end_offset": state.log.log_end_offset,
        },
    )
    return True


def check_segment(fd: int, size: int, base_offset: int) -> int | None:
    """Offset of the first corrupt frame in a sealed segment file (None: every frame is
    whole, dense from `base_offset` and passes its CRC). Blocking: run it on a thread."""
    if size == 0:
        return None
    with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as m, memoryview(m) as view:
        return first_corrupt_offset(view, base_offset)


def segment_error(state: Partition, base_offset: int, bad: int) -> CorruptLogError:
    """Report a corrupt sealed segment and return the error its download answers."""
    err = CorruptLogError(bad, f"segment {base_offset} of {state.topic}-{state.partition}")
    report(state, err)
    return err
