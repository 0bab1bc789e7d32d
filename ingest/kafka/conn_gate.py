"""Who may hold a Kafka connection: the HTTP listener's caps, and a separate one before SASL.

The HTTP listener's --max-connections and --max-connections-per-address apply to the Kafka
listeners too, counted apart from HTTP's (one client cannot take every socket). A connection
that has not authenticated yet (auth on, SASL pending) also counts against
--kafka-max-preauth-connections: those are cheap to open and cost nothing to hold idle, so
they get a small share of their own and a deadline (frames.py), and cannot crowd out
authenticated clients. Every count goes back down exactly once (`Admission.leave`), which
the gauges below let tests and operators check.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge

if TYPE_CHECKING:
    from cluster.http.guard import HttpLimits

log = logging.getLogger("tierlog.kafka")

CONNECTIONS = Gauge(
    "tierlog_kafka_connections", "Open Kafka connections by state", ["state"]
)  # state: preauth | authenticated
INFLIGHT = Gauge(
    "tierlog_kafka_inflight_request_bytes",
    "Kafka request bytes reserved until answered, by budget (main | preauth)",
    ["budget"],
)
REFUSED = Counter(
    "tierlog_kafka_connections_refused_total",
    "Kafka connections refused or closed by a connection limit",
    ["reason"],
)  # reason: connections | connections_per_address | preauth_connections | auth_timeout |
# preauth_frame_too_large | frame_too_large | inflight_bytes


class Admission:
    """One admitted connection's place in the counts."""

    __slots__ = ("_gate", "_open", "address", "preauth")

    def __init__(self, gate: ConnectionGate, address: str, preauth: bool) -> None:
        self._gate, self.address, self.preauth, self._open = gate, address, preauth, True

    def authenticated(self) -> None:
        """The connection authenticated: it leaves the pre-auth share."""
        if self._open and self.preauth:
            self.preauth = False
            self._gate.preauth -= 1
            CONNECTIONS.labels("preauth").dec()
            CONNECTIONS.labels("authenticated").inc()

    def leave(self) -> None:
        if not self._open:
            return
        self._open = False
        gate = self._gate
        gate.total -= 1
        left = gate.per_address.pop(self.address) - 1
        if left:
            gate.per_address[self.address] = left
        if self.preauth:
            gate.preauth -= 1
        CONNECTIONS.labels("preauth" if self.preauth else "authenticated").dec()


class ConnectionGate:
    """Shared by a broker's Kafka listeners (plaintext and TLS alike)."""

    def __init__(self, limits: HttpLimits, max_preauth: int) -> None:
        self.limits = limits
        self.max_preauth = max_preauth
        self.total = 0
        self.preauth = 0
        self.per_address: dict[str, int] = {}

    def _refusal(self, address: str, preauth: bool) -> str | None:
        if self.total >= self.limits.max_connections:
            return "connections"
        if self.per_address.get(address, 0) >= self.limits.max_connections_per_address:
            return "connections_per_address"
        if preauth and self.preauth >= self.max_preauth:
            return "preauth_connections"
        return None

    def admit(self, address: str, preauth: bool) -> Admission | None:
        """A place for a new connection, or None (the reason logged and counted)."""
        reason = self._refusal(address, preauth)
        if reason is not None:
            REFUSED.labels(reason).inc()
            log.warning("kafka connection refused: too many (%s)", reason, extra={"peer": address})
            return None
        self.total += 1
        self.per_address[address] = self.per_address.get(address, 0) + 1
        if preauth:
            self.preauth += 1
        CONNECTIONS.labels("preauth" if preauth else "authenticated").inc()
        return Admission(self, address, preauth)
