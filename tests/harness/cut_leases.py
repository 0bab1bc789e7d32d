"""The database's leases of brokers cut from Postgres, on the harness's manual clock.

A cut broker cannot heartbeat, so its lease row would lapse in *real* time (Postgres's now())
while the test thinks in manual time: on a loaded machine a few slow steps were enough for
the controller to fence a broker the test had not advanced past its lease, and elect another
(CI: "f1 caught up" timed out because f1 had become the leader). So while a broker is cut, its
rows are pinned far ahead, and the harness lets them lapse exactly when the manual clock has
run through what was left of them."""

from __future__ import annotations

from sqlalchemy import Engine, func, select, text, update

from metadata.schema import brokers, controller

_PINNED = text("now() + interval '1 hour'")
_LAPSED = text("now() - interval '1 second'")


class CutLeases:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._left: dict[int, float] = {}  # broker -> seconds of its lease left, manual time
        self._controller_left: dict[int, float] = {}  # holder -> its controller lease left

    def cut(self, broker_id: int) -> None:
        """Pin the broker's leases; remember how much of each was left."""
        if broker_id in self._left:
            return
        with self._engine.begin() as conn:
            left = conn.execute(
                select(func.extract("epoch", brokers.c.lease_expires_at - func.now())).where(
                    brokers.c.id == broker_id
                )
            ).scalar()
            self._left[broker_id] = max(0.0, float(left or 0))
            held = conn.execute(
                select(func.extract("epoch", controller.c.expires_at - func.now())).where(
                    controller.c.holder == broker_id
                )
            ).scalar()
            if held is not None:
                self._controller_left[broker_id] = max(0.0, float(held))
        self._write()

    def advance(self, seconds: float) -> None:
        for table in (self._left, self._controller_left):
            for broker_id in table:
                table[broker_id] -= seconds
        self._write()

    def restore_all(self) -> None:
        """Reconnected: the brokers' own heartbeats take their rows over again."""
        self._left.clear()
        self._controller_left.clear()

    def _write(self) -> None:
        with self._engine.begin() as conn:
            for broker_id, left in self._left.items():
                conn.execute(  # a lease ended meanwhile (a proven death) stays ended
                    update(brokers)
                    .where(brokers.c.id == broker_id, brokers.c.lease_expires_at > func.now())
                    .values(lease_expires_at=_PINNED if left > 0 else _LAPSED)
                )
            for holder, left in self._controller_left.items():
                conn.execute(
                    update(controller)
                    .where(controller.c.holder == holder, controller.c.expires_at > func.now())
                    .values(expires_at=_PINNED if left > 0 else _LAPSED)
                )
