"""The broker's TLS Kafka listeners: SASL_SSL (TLS, then SASL PLAIN or SCRAM) and SSL (TLS
only; the client is User:ANONYMOUS to the ACLs, as on a Kafka SSL listener that asks for no
client certificate). Both use the HTTP listener's --tls-cert/--tls-key.

Metadata on a TLS listener names this broker by that listener's own address, and the other
brokers by their registered (plaintext) Kafka address moved by the same port distance, so a
client that bootstrapped over TLS stays on TLS; lay brokers' listeners out alike (as
`tierlog dev` does for its ports).
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from ingest.broker_config import BrokerConfig, kafka_advertised
from ingest.kafka.listener import KafkaListener, ListenerShared

if TYPE_CHECKING:
    from cluster.kafka_groups import ClassicGroups
    from ingest.service.services import Services


def server_context(cfg: BrokerConfig) -> ssl.SSLContext:
    """TLS 1.2 or later with the broker's certificate and key."""
    if not (cfg.tls_cert and cfg.tls_key):
        raise ValueError("a TLS Kafka listener needs --tls-cert and --tls-key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cfg.tls_cert, cfg.tls_key)
    return context


def _advertised(cfg: BrokerConfig, listen: tuple[str, int]) -> tuple[str, int]:
    host, port = listen
    if host in ("0.0.0.0", "::", ""):
        plain = kafka_advertised(cfg)
        host = plain[0] if plain else "127.0.0.1"
    return host, port


def tls_listeners(
    services: Services, groups: ClassicGroups | None, shared: ListenerShared
) -> list[KafkaListener]:
    cfg = services.config
    wanted = [(cfg.kafka_sasl_ssl_listen, True), (cfg.kafka_ssl_listen, False)]
    if not any(listen for listen, _ in wanted):
        return []
    context = server_context(cfg)
    plain = kafka_advertised(cfg)
    out = []
    for listen, sasl in wanted:
        if listen is None:
            continue
        advertised = _advertised(cfg, listen)
        listener = KafkaListener(
            services, *listen, advertised, groups, tls=context, sasl=sasl, shared=shared
        )
        listener.listener_shift = advertised[1] - plain[1] if plain else 0
        out.append(listener)
    return out
