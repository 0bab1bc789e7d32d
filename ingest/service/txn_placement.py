"""Which broker FindCoordinator names for a transactional id (key type 1).

Kafka has one coordinator per transactional id (the leader of its `__transaction_state`
partition), so a client that asks again is named the same broker until that one fails.
Every tierlog broker can act for every id (the state is a row in Postgres, changed under its
lock), but naming the broker asked would move a client's coordinator at random: librdkafka
asks FindCoordinator again every second or so, of any broker, and each new answer closes
its coordinator connection, requests in flight included. So every broker names the same
one: the live broker ranked first for the id by rendezvous hashing. When it dies only its
ids move (to their next-ranked broker), and they come back when it is live again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def _rank(tid: str, broker_id: int) -> int:
    digest = hashlib.blake2b(f"{broker_id}:{tid}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def txn_coordinator_of(tid: str, live: Iterable[int]) -> int | None:
    """The broker among `live` that coordinates `tid` (None: no broker is live)."""
    return max(live, key=lambda broker_id: (_rank(tid, broker_id), broker_id), default=None)
