"""Corrupt frames found on this broker's disk: never served, counted, and repaired.

Every read that serves a client, a follower or the tiering worker checks each frame's CRC
(ingest/log/log_read.py, and `check_segment` for whole sealed segments). What fails is reported
here:

- a follower marks the offset where its copy went bad; its replica fetcher truncates the log
  there (at a frame boundary) before its next fetch and fetches the rest from the leader
  again, so normal replication repairs it byte for byte (below the high watermark only once
  it is out of the ISR: `repair`). Until then its high watermark still
  covers the bad frame, but every read of it fails the check and is not served;
- a leader cannot repair itself from anyone: it answers KAFKA_STORAGE_ERROR for the bad frames
  (clients retry, fetch nodes fail over to an in-sync follower, followers append nothing) and
  hands leadership to an in-sync replica (ReplicaManager.heal_offline); it keeps the bad
  offset, so its first fetch as a follower truncates there and repairs it like any other
  (without waiting for another read to meet the frame: a preferred-leader move could hand
  the partition back to the corrupt copy first). With no in-sync replica to take it, it
  keeps leading (`no_taker`): a committed bad frame is then a loss, reported once.
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
    follower = state.role is Role.FOLLOWER
    # Remembered in either role: a leader repairs as soon as it is a follower, before a
    # preferred-leader move could hand the partition back to its still-corrupt copy.
    pending = state.repair_from
    state.repair_from = err.offset if pending is None else min(pending, err.offset)
    if state.role is Role.LEADER:
        state.handoff_wanted = True  # then, as a follower, it repairs from the new leader
    skipped = _THROTTLE.allow((state.topic_id, state.partition, err.offset))
    if skipped is None:
        return
    if follower:
        then = "; refetching it from the leader"
    elif err.offset in state.lost_frames:
        then = "; it is the only in-sync copy: serving the rest"
    else:
        then = "; handing leadership off"
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
    in-sync copy: that is a loss, said once per frame (log and metric); the leader goes on
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
        "committed frame lost: its only in-sync copy is corrupt and no in-sync replica can"
        " take the partition; serving every whole frame",
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
    """Before a follower fetches: cut its log below a reported corrupt frame, so the fetch
    asks the leader for it (and everything after it) again. False: do not fetch yet.

    A follower still in the ISR never cuts below its high watermark: elected meanwhile (its
    leader failing over), it would lose committed records, as a chaos run did (seed 2626:
    offsets 117-392 of a partition, read by consumers, gone). It stops fetching instead, so its
    leader drops it from the ISR by replica lag, and cuts once metadata says it is out."""
    at = state.repair_from
    if at is None or state.role is not Role.FOLLOWER:
        return True  # a leader's bad frame waits for its hand-off: no one to fetch it from yet
    if at >= state.log.log_end_offset:
        state.repair_from = None
        return True
    if at < state.high_watermark and state.me in state.isr:
        return False  # out of the ISR first (see above)
    state.repair_from = None
    try:
        state.truncate_to(at)
    except Exception:  # e.g. the log is offline: leave the bad frame unserved, try again later
        state.repair_from = at
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
