"""The controller lease: at most one broker acts as controller, chosen through Postgres.

The single ``controller`` row holds (holder, epoch, expires_at). Every check uses the
database's clock (``now()``), so broker clocks never have to agree. The epoch moves each time
a broker *becomes* controller (not on renewals), so a controller can tell whether it kept the
lease without interruption, and writes can be fenced on it (``lease_held``).

Only a live broker (current lease in ``brokers``) can acquire or renew the controller lease,
and a lease whose holder's broker lease lapsed counts as expired: a broker the cluster
considers dead must not be making decisions for it, nor keep others from doing so.
"""

from __future__ import annotations

from datetime import timedelta
from typing import NamedTuple

from sqlalchemy import (
    ColumnElement,
    Integer,
    Interval,
    and_,
    bindparam,
    case,
    exists,
    func,
    not_,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine

from metadata.db import single_statements
from metadata.schema import brokers, controller


class ControllerFence(NamedTuple):
    """Who wrote: a change made "as controller" commits only while this lease is current."""

    broker_id: int
    epoch: int


def _positive_ms(lease_ms: int) -> timedelta:
    if isinstance(lease_ms, bool) or not isinstance(lease_ms, int) or lease_ms <= 0:
        raise ValueError(f"lease_ms must be a positive integer, got {lease_ms!r}")
    return timedelta(milliseconds=lease_ms)


def _current() -> ColumnElement[bool]:
    """The lease row is held: unexpired, and its holder is a live broker (a holder whose
    broker lease lapsed is dead to the cluster, so its controller lease is void too)."""
    holder_live = (
        exists()
        .where(brokers.c.id == controller.c.holder, brokers.c.lease_expires_at > func.now())
        .correlate(controller)
    )
    return and_(controller.c.holder.is_not(None), controller.c.expires_at > func.now(), holder_live)


def lease_held(conn: Connection, fence: ControllerFence) -> bool:
    """True if ``fence`` is the current, unexpired controller lease, and keep it so until
    the caller's transaction ends: the row is share-locked, so a takeover (an UPDATE of the
    row) waits for the caller to commit and then reads whatever the caller wrote."""
    row = conn.execute(
        select(controller.c.id)
        .where(
            controller.c.id == 1,
            controller.c.holder == fence.broker_id,
            controller.c.epoch == fence.epoch,
            _current(),
        )
        .with_for_update(read=True)
    ).first()
    return row is not None


# The renewal (twice a second on the controller, and as often on every broker that waits to
# take over) is built once, with its values bound per call: building it each time cost about
# three times what executing it does (1.0-1.5 ms against 0.35-0.4 ms of CPU, measured).
_BROKER_ID = bindparam("broker_id", type_=Integer)
_LEASE = bindparam("lease", type_=Interval)
_ACQUIRE = (
    update(controller)
    .where(
        controller.c.id == 1,
        or_(controller.c.holder == _BROKER_ID, not_(_current())),
        exists().where(brokers.c.id == _BROKER_ID, brokers.c.lease_expires_at > func.now()),
    )
    .values(
        holder=_BROKER_ID,
        # Renewing a current lease of ours keeps the epoch; any other acquisition bumps it.
        epoch=case(
            (and_(controller.c.holder == _BROKER_ID, _current()), controller.c.epoch),
            else_=controller.c.epoch + 1,
        ),
        expires_at=func.now() + _LEASE,
    )
    .returning(controller.c.epoch)
)
# What lapses_in_s reads after each of the controller's looks: built once too.
_HOLDER_EXPIRY = (
    select(brokers.c.lease_expires_at)
    .where(brokers.c.id == controller.c.holder)
    .correlate(controller)
    .scalar_subquery()
)
_ENDS = func.least(controller.c.expires_at, _HOLDER_EXPIRY)
_LAPSES_IN = select(
    case(
        (
            and_(
                controller.c.holder.is_not(None),
                controller.c.expires_at.is_not(None),
                _HOLDER_EXPIRY.is_not(None),
            ),
            _ENDS,
        ),
        else_=None,
    )
    - func.now()
).where(controller.c.id == 1)


class ControllerLease:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._polls = single_statements(engine)  # the holder renews every heartbeat

    def try_acquire(self, broker_id: int, lease_ms: int) -> int | None:
        """Acquire (if free or expired) or renew (if ours) the lease for ``lease_ms``.

        Returns the controller epoch when ``broker_id`` holds the lease after the call, else
        None. Acquiring bumps the epoch; renewing an unexpired lease keeps it. A lease of ours
        that had already expired is re-acquired with a new epoch: someone may have acted on
        the gap, so the caller must start a new term (re-read everything).
        """
        values = {"broker_id": broker_id, "lease": _positive_ms(lease_ms)}
        with self._polls.connect() as conn:
            epoch = conn.execute(_ACQUIRE, values).scalar()
        return None if epoch is None else int(epoch)

    def release(self, broker_id: int) -> bool:
        """Give the lease up now (clean shutdown), so another broker takes over at once.
        True if ``broker_id`` held a current lease."""
        stmt = (
            update(controller)
            .where(
                controller.c.id == 1,
                controller.c.holder == broker_id,
                _current(),
            )
            .values(holder=None, expires_at=func.now())
        )
        with self.engine.begin() as conn:
            return conn.execute(stmt).rowcount == 1

    def lapses_in_s(self) -> float:
        """Seconds until the current lease may lapse: its own expiry or its holder's broker
        lease, whichever ends first (0 when it is free or void now). Both only move forward
        while the holder lives; what ends the lease sooner is a release or a new holder (both
        move the metadata version) or the holder's broker proven dead (its death signal
        ticks the controller at once)."""
        with self._polls.connect() as conn:
            left = conn.execute(_LAPSES_IN).scalar()
        return 0.0 if left is None else max(0.0, left.total_seconds())

    def holder(self) -> tuple[int | None, int]:
        """(current holder, or None if the lease is free, expired or its holder is dead;
        the latest epoch)."""
        stmt = select(
            case((_current(), controller.c.holder), else_=None),
            controller.c.epoch,
        ).where(controller.c.id == 1)
        with self._polls.connect() as conn:
            holder, epoch = conn.execute(stmt).one()
        return (None if holder is None else int(holder)), int(epoch)
