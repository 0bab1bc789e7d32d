"""Broker registry: who is in the cluster and whose lease is current (by the DB's clock)."""

from __future__ import annotations

import builtins
from datetime import timedelta
from typing import Any

from sqlalchemy import Integer, Interval, bindparam, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Engine, Row, make_url

from logformat.errors import ErrorCode, TierlogError
from metadata.db import single_statements
from metadata.schema import brokers
from metadata.types import BrokerRegistration

# A broker whose replication connection to a peer dropped names the peer here (payload: its
# id), so that the controller re-checks it at once (ingest/replication/death_signal.py).
SUSPECT_CHANNEL = "tierlog_suspect"

# Kafka's broker.session.timeout.ms default. Kafka clients' Metadata lists a killed broker
# that long after its lease ended (ingest/kafka/cluster_apis.py); a clean shutdown ends the
# session at once, as Kafka fences a broker when its controlled shutdown completes.
SESSION_TIMEOUT = timedelta(seconds=9)


def session_name(broker_id: int) -> str:
    """The application_name of the Postgres session a broker holds while its process lives."""
    return f"tierlog-broker-{broker_id}"


def session_url(database_url: str, broker_id: int) -> str:
    """`database_url` connecting as the broker's named session (its LISTEN connection)."""
    named = make_url(database_url).update_query_dict({"application_name": session_name(broker_id)})
    return named.render_as_string(hide_password=False)


_COLUMNS = (
    brokers.c.id,
    brokers.c.url,
    (brokers.c.lease_expires_at > func.now()).label("alive"),
    brokers.c.lease_expires_at,
    brokers.c.rack,
    brokers.c.incarnation,
    brokers.c.kafka_address,
)


# Each broker's renewal, twice a second, and every broker's list of the cluster: built once
# (building them cost more CPU than executing them; metadata/controller_lease.py's _ACQUIRE).
_HEARTBEAT = (
    update(brokers)
    .where(
        brokers.c.id == bindparam("broker_id", type_=Integer),
        brokers.c.lease_expires_at > func.now(),
    )
    .values(lease_expires_at=func.now() + bindparam("lease", type_=Interval))
)
_LIST = select(*_COLUMNS).order_by(brokers.c.id)


def _lease(lease_ms: int) -> timedelta:
    if isinstance(lease_ms, bool) or not isinstance(lease_ms, int) or lease_ms <= 0:
        raise TierlogError(ErrorCode.INVALID_REQUEST, f"lease_ms must be > 0, got {lease_ms!r}")
    return timedelta(milliseconds=lease_ms)


def _info(row: Row[*tuple[Any, ...]]) -> BrokerRegistration:
    return BrokerRegistration(
        row.id,
        row.url,
        row.alive,
        row.lease_expires_at,
        row.rack,
        row.incarnation,
        row.kafka_address,
    )


class BrokerRepo:
    """Leases are compared with now() in Postgres, so broker clocks never have to agree."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._polls = single_statements(engine)  # heartbeats, and the lists duties poll

    def register(
        self,
        broker_id: int,
        url: str,
        lease_ms: int,
        rack: str | None = None,
        kafka_address: str | None = None,
    ) -> BrokerRegistration:
        """Join (or re-join) the cluster: upsert, start a lease, bump the incarnation."""
        if isinstance(broker_id, bool) or not isinstance(broker_id, int) or broker_id < 0:
            raise TierlogError(
                ErrorCode.INVALID_REQUEST, f"broker id must be an integer >= 0, got {broker_id!r}"
            )
        lease = _lease(lease_ms)
        ins = insert(brokers).values(
            id=broker_id,
            url=url,
            rack=rack,
            kafka_address=kafka_address,
            lease_expires_at=func.now() + lease,
            registered_at=func.now(),
            incarnation=1,
        )
        stmt = ins.on_conflict_do_update(
            index_elements=[brokers.c.id],
            set_={
                "url": ins.excluded.url,
                "rack": ins.excluded.rack,
                "kafka_address": ins.excluded.kafka_address,
                "lease_expires_at": ins.excluded.lease_expires_at,
                "registered_at": ins.excluded.registered_at,
                "incarnation": brokers.c.incarnation + 1,
            },
        ).returning(*_COLUMNS)
        with self.engine.begin() as conn:
            return _info(conn.execute(stmt).one())

    def heartbeat(self, broker_id: int, lease_ms: int) -> bool:
        """Extend a current lease. False if unknown or already expired: then re-register,
        because the controller may have acted on the expiry (new incarnation)."""
        values = {"broker_id": broker_id, "lease": _lease(lease_ms)}
        with self._polls.connect() as conn:
            return conn.execute(_HEARTBEAT, values).rowcount == 1

    def deregister(self, broker_id: int) -> None:
        """Clean shutdown: the lease ends now, so leadership moves without waiting it out,
        and so does the session (dated SESSION_TIMEOUT back): Kafka clients stop seeing the
        broker at once, where a killed one stays listed for the session timeout."""
        stmt = (
            update(brokers)
            .where(brokers.c.id == broker_id, brokers.c.lease_expires_at > func.now())
            .values(lease_expires_at=func.now() - SESSION_TIMEOUT)
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)

    def end_lease(self, broker_id: int, incarnation: int) -> bool:
        """End the lease of a broker found dead (ingest/replication/death_signal.py), so the
        controller moves its leaderships now. Only that incarnation's: one that registered
        again since is alive. True if a current lease ended."""
        stmt = (
            update(brokers)
            .where(
                brokers.c.id == broker_id,
                brokers.c.incarnation == incarnation,
                brokers.c.lease_expires_at > func.now(),
            )
            .values(lease_expires_at=func.now())
        )
        with self.engine.begin() as conn:
            return conn.execute(stmt).rowcount == 1

    def report_suspect(self, broker_id: int) -> None:
        """Tell every broker (the controller among them) that `broker_id` may be dead."""
        with self.engine.begin() as conn:
            conn.execute(
                text("SELECT pg_notify(:c, :s)"), {"c": SUSPECT_CHANNEL, "s": str(broker_id)}
            )

    def has_session(self, broker_id: int) -> bool:
        """Whether the broker's process holds its named Postgres session (session_name): a
        killed process's connection closes with it, a paused or draining one's stays."""
        stmt = text("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = :n)")
        with self.engine.connect() as conn:
            return bool(conn.execute(stmt, {"n": session_name(broker_id)}).scalar())

    def get(self, broker_id: int) -> BrokerRegistration | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(*_COLUMNS).where(brokers.c.id == broker_id)).first()
        return None if row is None else _info(row)

    def list(self) -> builtins.list[BrokerRegistration]:
        with self._polls.connect() as conn:
            return [_info(r) for r in conn.execute(_LIST)]

    def live_ids(self) -> builtins.list[int]:
        stmt = (
            select(brokers.c.id)
            .where(brokers.c.lease_expires_at > func.now())
            .order_by(brokers.c.id)
        )
        with self._polls.connect() as conn:
            return list(conn.execute(stmt).scalars())
