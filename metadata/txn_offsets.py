"""TxnOffsetCommit's offsets kept with the transaction under way, in one statement
(metadata/transactions.py's TxnRepo.txn_offsets tries it first): a consume-transform-produce
loop sends one every transaction, and the locked path costs a ping, BEGIN, SELECT ... FOR
UPDATE, UPDATE and COMMIT. The row changes only if (id, producer, epoch) match, the
transaction is under way and the group was added to it (AddOffsetsToTxn): else nothing
changes and the locked path answers with Kafka's error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.engine import Engine

from metadata.txn_engine import autocommitted

# The group's entries: its earlier ones for partitions the request does not name, then the
# request's; member and generation are the request's.
_KEEP_OFFSETS = text(
    """
    UPDATE kafka_transactions t SET
        updated_at = CAST(:now AS timestamptz),
        offsets = jsonb_set(t.offsets, ARRAY[CAST(:grp AS text)], jsonb_build_object(
            'member', CAST(:member AS text),
            'generation', CAST(:generation AS integer),
            'entries', COALESCE((
                SELECT jsonb_agg(e)
                FROM jsonb_array_elements(t.offsets -> CAST(:grp AS text) -> 'entries') e
                WHERE NOT EXISTS (
                    SELECT 1 FROM jsonb_array_elements(CAST(:new AS jsonb)) n
                    WHERE n -> 0 = e -> 0 AND n -> 1 = e -> 1
                )
            ), CAST('[]' AS jsonb)) || CAST(:new AS jsonb)
        ))
    WHERE t.transactional_id = :tid AND t.producer_id = :pid AND t.producer_epoch = :epoch
      AND t.state = 'Ongoing' AND jsonb_exists(t.offsets, CAST(:grp AS text))
    """
)


def keep_offsets(
    engine: Engine,
    ids: tuple[str, int, int],
    group: str,
    member: tuple[str, int],
    entries: Iterable[tuple[str, int, int, str | None]],
) -> bool:
    """The entries kept with the group in transaction `ids` (transactional id, producer id,
    epoch) in one statement on `engine` (unpinged): whether it changed the row."""
    tid, pid, epoch = ids
    new = {(t, p): [t, p, offset, meta] for t, p, offset, meta in entries}  # last one wins
    params = {
        "now": datetime.now(UTC),
        "grp": group,
        "member": member[0],
        "generation": member[1],
        "new": json.dumps(list(new.values())),
        "tid": tid,
        "pid": pid,
        "epoch": epoch,
    }
    return autocommitted(engine, lambda conn: conn.execute(_KEEP_OFFSETS, params).rowcount) == 1
