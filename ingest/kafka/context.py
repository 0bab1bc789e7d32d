"""What a Kafka request handler sees: the broker, the caller, and Kafka addresses.

Brokers register their Kafka address (--kafka-advertised, else the listen address) beside
their HTTP URL (metadata/brokers.py), and Metadata names each broker by it, so the two may
be reached under different names (compose: HTTP between containers, Kafka from the host).
A broker registered without one (no listener, or an older version) gets one derived from
its URL: the same host, and the port moved by this broker's Kafka-minus-HTTP distance
(`tierlog dev`: 8080 -> 9092, 8081 -> 9093, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cluster.authorizer import ANONYMOUS
from ingest.kafka.turns import Turns

if TYPE_CHECKING:
    from cluster.kafka_groups import ClassicGroups
    from cluster.kafka_transactions import TransactionStore
    from ingest.kafka.sasl_scram import ScramExchange
    from ingest.service.cluster_identity import ClusterIdentity
    from ingest.service.services import Services


def host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname or "127.0.0.1", port


class KafkaContext:
    """Per connection. The caller is User:ANONYMOUS until SASL names its principal
    (sasl_apis.py); with auth on, only ApiVersions and SASL are served before that."""

    def __init__(
        self,
        services: Services,
        advertised: tuple[str, int],
        groups: ClassicGroups | None = None,
        identity: ClusterIdentity | None = None,
    ) -> None:
        self.services = services
        self.identity = identity or services.identity  # shared by the listener
        self.advertised = advertised
        self.groups = groups  # None: no groups extension mounted (COORDINATOR_NOT_AVAILABLE)
        # The transaction coordinator's store, for ListTransactions and DescribeTransactions
        # (metadata/transactions.py; None: none to list or describe).
        self.transactions: TransactionStore | None = services.txns.repo
        self.principal = ANONYMOUS
        self.peer = ""  # the client's address: for the audit of failed logins
        self.sasl_started = False  # a SaslHandshake chose PLAIN
        self.raw_sasl = False  # a v0 SaslHandshake: the next frame is a bare SASL token
        self.scram: ScramExchange | None = None  # a SCRAM exchange under way
        self.authenticated = False
        self.closing = False  # close once the current answer is sent (failed auth)
        # Quotas and the long-poll cap (client_limits.py): the loop time before which the
        # connection's next request is not served, and the back-off of a refused long poll
        # or of a produce paused for tiering.
        self.muted_until = 0.0
        self.backoff_s = 0.0
        self.turns = Turns()  # the connection's requests, one after another (turns.py)
        # True once the client hung up (the listener sets it): long work for it stops.
        self.client_gone: Callable[[], bool] = lambda: False
        self._port_shift = advertised[1] - host_port(services.config.advertised_url)[1]
        # A TLS listener's distance from the registered (plaintext) one: other brokers'
        # registered addresses are moved by it, as their listeners are laid out alike.
        self.listener_shift = 0

    def allowed(self, resource_type: str, name: str, operation: str) -> bool:
        return self.services.security.authorizer.allowed(
            self.principal, resource_type, name, operation
        )

    def require(self, resource_type: str, name: str, operation: str) -> None:
        self.services.security.authorizer.require(self.principal, resource_type, name, operation)

    def kafka_address(self, broker_id: int) -> tuple[str, int] | None:
        if broker_id == self.services.config.broker_id:
            return self.advertised
        registered = self.services.metadata.broker_kafka_address(broker_id)
        if registered:
            name, _, number = registered.rpartition(":")
            return name.strip("[]"), int(number) + self.listener_shift
        url = self.services.metadata.broker_url(broker_id)
        if url is None:
            return None
        host, port = host_port(url)
        return host, port + self._port_shift
