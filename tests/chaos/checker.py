"""The history checker: a chaos run's history against the final log, with Kafka's guarantees
applied per producer kind.

- Dense offsets: the final log holds every offset from its start to the high watermark.
- Acknowledged records: idempotent acks=all exactly once, at the acknowledged offset; plain
  acks=all at the acknowledged offset (retries may have written it again elsewhere); acks=1
  at the acknowledged offset unless the partition's leader epoch moved on after the
  acknowledgement (Kafka loses acks=1 records only across a leader failover).
- Nothing vanishes: every record a consumer read is in the final log at the same offset with
  the same key and value (fetch serves only committed records, below the high watermark).
- Each consumer read each partition densely: no offset skipped.
- Per-key order: a producer's records of one key appear in the order it sent them; for an
  idempotent producer, each exactly once (a producer whose client keeps no order across
  leader changes, `history.unordered`, is held to the rest only).
- Every record in the log is one the workload wrote, with its key (not corrupted bytes).
- A record whose delivery the client gave up on (a Kafka producer's message timeout, an HTTP
  producer's patience) was never acknowledged: it may or may not be in the log, as Kafka
  allows. But once the nemesis has stopped and every broker is back, the cluster must deliver
  what it is sent: a record sent then and given up is a violation (a hang, say, or a leader
  clients cannot reach).

`check` returns the violations found, each a sentence; an empty list is a pass.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from tests.chaos.history import UNKNOWN_OFFSET, Ack, History, Kind, Row, parse_value

MAX_REPORTED = 20  # per check: one broken guarantee can yield thousands of lines


def check(
    history: History, final: dict[int, list[Row]], high_watermarks: dict[int, int]
) -> list[str]:
    """Violations of `history` against the final log: `final[p]` is partition p read in full
    after the run, `high_watermarks[p]` its high watermark. Partitions missing from `final`
    (they could not be read: reported apart) are left out."""
    found: list[str] = [f"client saw: {e}" for e in history.errors[:MAX_REPORTED]]
    for p, rows in sorted(final.items()):
        found += _dense(p, rows, high_watermarks.get(p))
        found += _known_values(p, rows, history)
        found += _per_key_order(p, rows, history)
    found += _acknowledged(history, final)
    found += _reads_stay(history, final)
    found += _consumers_dense(history)
    found += _failed_when_healed(history)
    return found


def _failed_when_healed(history: History) -> list[str]:
    healed = history.healed_at
    problems = [
        f"{f.producer}: {f.value} sent {f.sent - healed:.1f}s after the faults ended, given up: "
        f"{f.reason}"
        for f in history.failed
        if healed is not None and f.sent >= healed
    ]
    return _capped(problems, "deliveries given up on a healed cluster")


def _capped(problems: list[str], what: str) -> list[str]:
    if len(problems) > MAX_REPORTED:
        return [*problems[:MAX_REPORTED], f"... and {len(problems) - MAX_REPORTED} more {what}"]
    return problems


def _dense(p: int, rows: list[Row], hw: int | None) -> list[str]:
    problems: list[str] = []
    start = rows[0].offset if rows else 0
    for i, row in enumerate(rows):
        if row.offset != start + i:
            problems.append(f"partition {p}: offset {row.offset} where {start + i} was due")
            break
    end = rows[-1].offset + 1 if rows else start
    if hw is not None and end != hw:
        problems.append(f"partition {p}: the log ends at {end} but the high watermark is {hw}")
    return problems


def _known_values(p: int, rows: list[Row], history: History) -> list[str]:
    problems = []
    for row in rows:
        parsed = parse_value(row.value)
        if parsed is None or parsed[0] not in history.kinds:
            problems.append(f"partition {p} offset {row.offset}: unknown value {row.value!r}")
        elif parsed[1] != row.key:
            problems.append(
                f"partition {p} offset {row.offset}: key {row.key!r} with value {row.value!r}"
            )
    return _capped(problems, "unknown records")


def _per_key_order(p: int, rows: list[Row], history: History) -> list[str]:
    problems = []
    last: dict[tuple[str, str], int] = {}  # (producer, key) -> highest n seen so far
    seen: set[str] = set()
    for row in rows:
        parsed = parse_value(row.value)
        if parsed is None or parsed[0] not in history.kinds:
            continue
        producer, key, n = parsed
        idempotent = history.kinds[producer] is Kind.IDEMPOTENT_ALL
        if producer in history.unordered:
            continue  # its client keeps no per-key order (tests/chaos/kafka_workload.py)
        if row.value in seen:
            if idempotent:
                problems.append(f"partition {p}: {row.value} duplicated (offset {row.offset})")
            continue  # a plain producer's retry: allowed, and not an order change
        assert row.value is not None
        seen.add(row.value)
        before = last.get((producer, key), -1)
        if n < before:
            problems.append(
                f"partition {p}: {row.value} at offset {row.offset} after {producer}|{key}|{before}"
            )
        last[(producer, key)] = max(n, before)
    return _capped(problems, "order violations")


def _failover_after(history: History, ack: Ack) -> bool:
    """Whether the partition's leader epoch rose after `ack` (a failover could truncate it)."""
    at_ack = [e.epoch for e in history.epochs if e.partition == ack.partition and e.at <= ack.at]
    later = [e.epoch for e in history.epochs if e.partition == ack.partition and e.at > ack.at]
    return bool(later) and max(later) > max(at_ack, default=-1)


def _acknowledged_somewhere(ack: Ack, found: list[tuple[int, int]]) -> list[str]:
    """An acknowledgement without an offset: the record must be in its partition (exactly
    once for an idempotent producer)."""
    mine = [o for p, o in found if p == ack.partition]
    if mine and (ack.kind is not Kind.IDEMPOTENT_ALL or len(found) == 1):
        return []
    what = f"written {len(found)} times" if mine else f"lost (found at {found})"
    return [f"{ack.kind.value} {ack.value} acknowledged in partition {ack.partition} {what}"]


def _acknowledged(history: History, final: dict[int, list[Row]]) -> list[str]:
    problems: list[str] = []
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    by_offset: dict[tuple[int, int], str | None] = {}
    for p, rows in final.items():
        for row in rows:
            by_offset[(p, row.offset)] = row.value
            if row.value is not None:
                where[row.value].append((p, row.offset))
    for ack in history.acks:
        if ack.partition not in final:
            continue
        if ack.offset == UNKNOWN_OFFSET:
            problems += _acknowledged_somewhere(ack, where[ack.value])
            continue
        at = by_offset.get((ack.partition, ack.offset), "(beyond the log)")
        if at == ack.value and (ack.kind is not Kind.IDEMPOTENT_ALL or len(where[ack.value]) == 1):
            continue
        if ack.kind is Kind.IDEMPOTENT_ALL and at == ack.value:
            problems.append(f"{ack.kind.value} {ack.value} written {len(where[ack.value])} times")
        elif ack.kind is Kind.PLAIN_ONE and _failover_after(history, ack):
            pass  # allowed: Kafka's acks=1 contract (counted by `allowed_losses`)
        else:
            problems.append(
                f"{ack.kind.value} {ack.value} acknowledged at {ack.partition}:{ack.offset} "
                f"lost: that offset holds {at!r}, the record is at {where.get(ack.value, [])}"
            )
    return _capped(problems, "acknowledged records lost")


def _reads_stay(history: History, final: dict[int, list[Row]]) -> list[str]:
    problems = []
    by_offset = {(p, row.offset): row for p, rows in final.items() for row in rows}
    for r in history.reads:
        if r.partition not in final:
            continue
        row = by_offset.get((r.partition, r.offset))
        if row is None or (row.key, row.value) != (r.key, r.value):
            now = "nothing" if row is None else repr(row.value)
            problems.append(
                f"{r.consumer} read {r.value!r} at {r.partition}:{r.offset}, which now holds {now}"
            )
    return _capped(problems, "vanished reads")


def _consumers_dense(history: History) -> list[str]:
    problems = []
    next_offset: dict[tuple[str, int], int] = {}
    for r in history.reads:
        due = next_offset.get((r.consumer, r.partition))
        if due is not None and r.offset != due:
            problems.append(
                f"{r.consumer} read partition {r.partition} at offset {r.offset} after "
                f"{due - 1}: {'skipped' if r.offset > due else 'went back'}"
            )
        next_offset[(r.consumer, r.partition)] = r.offset + 1
    return _capped(problems, "consumer gaps")


def allowed_losses(history: History, final: dict[int, list[Row]]) -> dict[str, int]:
    """What Kafka allows and the run still did, to report: acks=1 records lost across a
    failover, and plain producers' records written more than once."""
    present = Counter(row.value for rows in final.values() for row in rows)
    lost_one = sum(
        1
        for a in history.acks
        if a.kind is Kind.PLAIN_ONE and a.partition in final and not present[a.value]
    )
    plain = {n for n, k in history.kinds.items() if k is not Kind.IDEMPOTENT_ALL}
    duplicated = sum(
        1 for v, n in present.items() if n > 1 and (parse_value(v) or ("",))[0] in plain
    )
    given_up = Counter(f.producer for f in history.failed)  # unacknowledged, per producer
    return {
        "acks=1 lost in a failover": lost_one,
        "plain records duplicated": duplicated,
        "deliveries given up (unacknowledged)": len(history.failed),
        **{f"given up by {name}": n for name, n in sorted(given_up.items())},
    }
