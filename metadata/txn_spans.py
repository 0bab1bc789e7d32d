"""Each partition's transaction spans in Postgres (migration 0014_transactions): the offsets
of a transaction's records while it is under way (ongoing) and once aborted, and of each
control record (marker). The partition's leader records them (ingest/service/txn_log.py);
reads, tiering (tiering/txn_filter.py) and a new leader read them back. Part of the
transaction store: metadata/transactions.py's TxnRepo is a TxnSpans."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import NamedTuple

from sqlalchemy import (
    BigInteger,
    Column,
    Integer,
    Table,
    Text,
    and_,
    delete,
    func,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.engine import Connection, Engine

from metadata.txn_engine import autocommitted, unpinged
from metadata.txn_tables import META

kafka_txn_spans = Table(
    "kafka_txn_spans",
    META,
    Column("topic", Text, primary_key=True),
    Column("partition", Integer, primary_key=True),
    Column("first_offset", BigInteger, primary_key=True),
    Column("last_offset", BigInteger, nullable=False),
    Column("producer_id", BigInteger, nullable=False),
    Column("kind", Text, nullable=False),
)


class Span(NamedTuple):
    """Offsets [first, last] of one partition: a transaction's records (ongoing, aborted)
    or one control record (marker)."""

    first_offset: int
    last_offset: int
    producer_id: int
    kind: str


class NewSpans(NamedTuple):
    """A leader's ongoing spans of one partition, to record."""

    topic: str
    partition: int
    spans: tuple[Span, ...]


class Completed(NamedTuple):
    """A transaction whose markers are all written (their spans recorded in the same
    statement or before it): its row goes from `prepared` (PrepareCommit/PrepareAbort) to
    `done` (Complete*), as TxnRepo.finish would, unless another broker finished it already.
    `after`: what must have been recorded first (the leader's own; empty here)."""

    transactional_id: str
    producer_id: int
    prepared: str
    done: str
    after: tuple[object, ...] = ()


class Closed(NamedTuple):
    """A marker written at `marker_offset` of a partition, ending producer `producer_id`'s
    transaction there: its ongoing spans become ordinary data (commit) or aborted ones."""

    topic: str
    partition: int
    producer_id: int
    commit: bool
    marker_offset: int


# One statement whatever the number of spans (arrays, not a VALUES list per count): its
# text is the same every time, so it is compiled once here and prepared by psycopg, where
# a VALUES list of each new length was compiled again on the transaction path's every call.
_PUT_SPANS = text(
    """
    WITH new AS (
        SELECT * FROM unnest(
            CAST(:topics AS text[]), CAST(:partitions AS integer[]),
            CAST(:firsts AS bigint[]), CAST(:lasts AS bigint[]),
            CAST(:pids AS bigint[]), CAST(:kinds AS text[])
        ) AS n(topic, "partition", first_offset, last_offset, producer_id, kind)
    ), completing AS (
        UPDATE kafka_transactions t SET
            state = f.done, started_at = NULL, partitions = '[]'::jsonb,
            offsets = '{}'::jsonb, updated_at = CAST(:now AS timestamptz)
        FROM unnest(
            CAST(:completed_ids AS text[]), CAST(:completed_pids AS bigint[]),
            CAST(:completed_from AS text[]), CAST(:completed_to AS text[])
        ) AS f(transactional_id, producer_id, prepared, done)
        WHERE t.transactional_id = f.transactional_id AND t.producer_id = f.producer_id
          AND t.state = f.prepared
    ), closing AS (
        DELETE FROM kafka_txn_spans s
        USING unnest(
            CAST(:closed_topics AS text[]), CAST(:closed_partitions AS integer[]),
            CAST(:closed_pids AS bigint[])
        ) AS c(topic, "partition", producer_id)
        WHERE s.kind = 'ongoing' AND s.topic = c.topic AND s."partition" = c."partition"
          AND s.producer_id = c.producer_id
          AND NOT EXISTS (
              SELECT 1 FROM new WHERE new.topic = s.topic
              AND new."partition" = s."partition" AND new.first_offset = s.first_offset
          )
    )
    INSERT INTO kafka_txn_spans (topic, "partition", first_offset, last_offset, producer_id, kind)
    SELECT * FROM new
    ON CONFLICT (topic, "partition", first_offset) DO UPDATE SET
        last_offset = EXCLUDED.last_offset, producer_id = EXCLUDED.producer_id,
        kind = EXCLUDED.kind
    """
)


def _put_spans(
    conn: Connection,
    rows: Iterable[tuple[str, int, Span]],
    commits: Iterable[Closed] = (),
    completed: Iterable[Completed] = (),
) -> None:
    """Spans at their first offsets, in one statement, each replacing one left there by a
    leader whose records at that offset were truncated (written after the new leader
    dropped its spans). In the same statement, `commits` (markers of committed
    transactions) make their producers' ongoing spans ordinary data: the rows it deletes
    are never ones it writes (Postgres leaves undefined a row changed twice in a statement),
    and one at an offset written here is replaced instead, as a delete and then a write
    would leave it. `completed` transactions' rows are finished in the same statement
    (their markers' spans are among `rows`, or were recorded before)."""
    values = {
        (topic, partition, span.first_offset): (topic, partition, span)
        for topic, partition, span in rows
    }  # one row per key: a statement may not update a row twice
    done = list(completed)
    if not values and not done:
        return
    spans = list(values.values())
    ended = [(c.topic, c.partition, c.producer_id) for c in commits]
    conn.execute(
        _PUT_SPANS,
        {
            "now": datetime.now(UTC),
            "completed_ids": [c.transactional_id for c in done],
            "completed_pids": [c.producer_id for c in done],
            "completed_from": [c.prepared for c in done],
            "completed_to": [c.done for c in done],
            "topics": [t for t, _, _ in spans],
            "partitions": [p for _, p, _ in spans],
            "firsts": [s.first_offset for _, _, s in spans],
            "lasts": [s.last_offset for _, _, s in spans],
            "pids": [s.producer_id for _, _, s in spans],
            "kinds": [s.kind for _, _, s in spans],
            "closed_topics": [t for t, _, _ in ended],
            "closed_partitions": [p for _, p, _ in ended],
            "closed_pids": [pid for _, _, pid in ended],
        },
    )


def _close(conn: Connection, closed: list[Closed], commit: bool) -> None:
    s = kafka_txn_spans.c
    keys = [(c.topic, c.partition, c.producer_id) for c in closed if c.commit == commit]
    if not keys:
        return
    mine = and_(s.kind == "ongoing", tuple_(s.topic, s.partition, s.producer_id).in_(keys))
    if commit:
        conn.execute(delete(kafka_txn_spans).where(mine))
    else:
        conn.execute(update(kafka_txn_spans).where(mine).values(kind="aborted"))


class TxnSpans:
    """The spans of every partition (the leader's writes, everyone's reads)."""

    engine: Engine

    @property
    def hot(self) -> Engine:
        """The engine of the statements every transaction takes: committed each on its own,
        on connections not pinged first (metadata/txn_engine.py)."""
        return unpinged(self.engine)

    def add_span(self, topic: str, partition: int, pid: int, first: int, last: int) -> None:
        self.add_spans(topic, partition, [Span(first, last, pid, "ongoing")])

    def add_spans(self, topic: str, partition: int, spans: Iterable[Span]) -> None:
        self.write_spans([NewSpans(topic, partition, tuple(spans))], [])

    def close_spans(
        self, topic: str, partition: int, pid: int, commit: bool, marker_offset: int
    ) -> None:
        """A marker was written at `marker_offset`: the producer's ongoing spans become
        ordinary data (commit) or aborted ones, and the marker is a span of its own."""
        self.write_spans([], [Closed(topic, partition, pid, commit, marker_offset)])

    def write_spans(
        self,
        new: Iterable[NewSpans],
        closed: Iterable[Closed],
        completed: Iterable[Completed] = (),
    ) -> None:
        """Many partitions' span changes at once (the leader gathers what its partitions ask
        at once: txn_log.py): one statement, or with aborts among the closings one Postgres
        transaction of at most three. The closings go first; a partition's new spans never
        follow its own marker in one call (the leader writes a marker only once the spans
        before it are recorded). `completed` rows are finished in the same statement."""
        closed = list(closed)
        rows = [(n.topic, n.partition, span) for n in new for span in n.spans]
        rows += [
            (c.topic, c.partition, Span(c.marker_offset, c.marker_offset, c.producer_id, "marker"))
            for c in closed
        ]
        if all(c.commit for c in closed):  # commits' markers (and new spans): one statement
            autocommitted(self.hot, lambda conn: _put_spans(conn, rows, closed, completed))
            return
        with self.engine.begin() as conn:
            _close(conn, closed, commit=True)
            _close(conn, closed, commit=False)
            _put_spans(conn, rows, (), completed)

    def spans(self, topic: str, partition: int) -> builtins.list[Span]:
        s = kafka_txn_spans.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(s.first_offset, s.last_offset, s.producer_id, s.kind)
                .where(s.topic == topic, s.partition == partition)
                .order_by(s.first_offset)
            ).all()
        return [Span(int(a), int(b), int(c), str(d)) for a, b, c, d in rows]

    def prune_spans_below(self, topic: str, partition: int, offset: int) -> int:
        """Ended spans wholly below `offset` (the log start: their records are deleted or
        tiered without them, so no read needs them); how many went. The newest marker stays:
        reads of a partition with spans look for marker rows (the cold tier keeps some)."""
        s = kafka_txn_spans.c
        mine = and_(s.topic == topic, s.partition == partition)
        with self.engine.begin() as conn:
            newest = conn.execute(
                select(func.max(s.first_offset)).where(mine, s.kind == "marker")
            ).scalar()
            return conn.execute(
                delete(kafka_txn_spans).where(
                    mine,
                    s.last_offset < offset,
                    s.kind != "ongoing",
                    s.first_offset != (newest if newest is not None else -1),
                )
            ).rowcount

    def drop_spans_from(self, topic: str, partition: int, offset: int) -> None:
        """Spans at or past `offset` (a new leader's log ends there: they were truncated)."""
        s = kafka_txn_spans.c
        with self.engine.begin() as conn:
            conn.execute(
                delete(kafka_txn_spans).where(
                    s.topic == topic, s.partition == partition, s.first_offset >= offset
                )
            )
