"""Producer frames and the leader's drain, for the producer-state tests."""

from __future__ import annotations

import pyarrow as pa

from ingest.log.local_log import LocalLog
from ingest.unified.producer_state import ProducerStateManager, Verdict
from logformat.errors import TierlogError
from logformat.frame import decode_header, encode_frame
from logformat.schema import HEADERS, RECORD_SCHEMA, TIMESTAMP

PID = 42


def pframe(pid: int = PID, epoch: int = 0, seq: int = 0, n: int = 2, ts: int = 1_000) -> bytearray:
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int32()),
            pa.array([ts] * n, TIMESTAMP),
            pa.array([b"k"] * n, pa.binary()),
            pa.array([b"v" * 8] * n, pa.binary()),
            pa.array([None] * n, HEADERS),
        ],
        schema=RECORD_SCHEMA,
    )
    return encode_frame(batch, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def manager(env, **kwargs) -> ProducerStateManager:
    return ProducerStateManager(env.index, env.topic_id, env.partition, **kwargs)


Answer = list[tuple[int, int]] | TierlogError


def drain(
    plog: LocalLog, mgr: ProducerStateManager, requests: list[list[bytearray]]
) -> list[Answer]:
    """The leader's group-commit drain, as Partition._drain should call the manager."""
    pending = mgr.begin(plog.log_end_offset)
    plan: list[tuple[int, list[Verdict]] | TierlogError] = []
    to_write: list[bytearray] = []
    for request in requests:
        mark = pending.mark()
        try:
            verdicts = []
            for frame in request:
                h = decode_header(frame)
                verdicts.append(
                    pending.check_and_stage(
                        h.producer_id,
                        h.producer_epoch,
                        h.base_sequence,
                        h.record_count,
                        h.max_timestamp,
                    )
                )
        except TierlogError as exc:
            pending.rollback(mark)
            plan.append(exc)
            continue
        plan.append((len(to_write), verdicts))
        to_write += [f for f, v in zip(request, verdicts, strict=True) if not v.duplicate]
    ranges = plog.append(to_write, leader_epoch=max(plog.latest_epoch, 0), now_ms=1)
    pending.commit(ranges)
    out: list[Answer] = []
    for item in plan:
        if isinstance(item, TierlogError):
            out.append(item)
            continue
        i, verdicts = item
        answer = []
        for v in verdicts:
            if v.duplicate:
                answer.append((v.base_offset, v.last_offset))
            else:
                answer.append(ranges[i])
                i += 1
        out.append(answer)
    return out
