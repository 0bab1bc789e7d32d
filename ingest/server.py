"""`tierlog broker`: one broker and its HTTP application, served until SIGINT/SIGTERM."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cluster.extension import Extension, kafka_groups_of, node_lifespan, routes_of
from cluster.http.server import run_server
from cluster.kafka_groups import ClassicGroups
from cluster.notify_hub import NotifyHub
from cluster.read_contract import ColdReader
from ingest.api.app import build_app
from ingest.broker import Broker
from ingest.broker_config import BrokerConfig, kafka_advertised
from ingest.broker_deps import BrokerDeps
from ingest.service.services import Services

if TYPE_CHECKING:
    from ingest.kafka.listener import KafkaListener

BrokerExtension = Callable[[Broker], Extension]


def serve(
    config: BrokerConfig,
    cold_reader: ColdReader | None = None,
    extensions: Sequence[BrokerExtension] = (),
    notices: NotifyHub | None = None,
) -> None:
    """Run one broker until SIGINT/SIGTERM. `notices`: its LISTEN connection, when the
    cold reader shares it."""
    broker = Broker(config, BrokerDeps.of_process(config, notices), cold_reader)
    services = Services.of(broker)  # what both front-ends call (docs/architecture.md)
    added = [make(broker) for make in extensions]

    def started() -> None:
        # Long-lived startup objects leave the GC's view; produce bodies make many young
        # objects, and default thresholds would rescan everything far too often.
        gc.collect()
        gc.freeze()

    kafka = kafka_listeners(services, kafka_groups_of(added))

    async def start() -> None:
        await broker.start()
        for listener in kafka:  # after start: their handlers need the hosted partitions
            await listener.start()

    async def stop() -> None:
        for listener in kafka:
            await listener.stop()
        await broker.stop()

    gc.set_threshold(50_000, 20, 20)
    lifespan = node_lifespan(start, stop, added, started)
    app = build_app(services, lifespan, routes_of(added))
    run_server(
        app,
        config.host,
        config.port,
        config.tls_cert,
        config.tls_key,
        config.http_limits,
        on_exit=broker.begin_drain,
    )


def kafka_listener(services: Services, groups: ClassicGroups | None = None) -> KafkaListener | None:
    """The plaintext Kafka listener when --kafka-listen is set, with the address it advertises
    and the consumer groups it serves (an extension's)."""
    cfg = services.config
    advertised = kafka_advertised(cfg)
    if cfg.kafka_listen is None or advertised is None:
        return None
    from ingest.kafka.listener import KafkaListener

    host, port = cfg.kafka_listen
    return KafkaListener(services, host, port, advertised, groups)


def kafka_listeners(services: Services, groups: ClassicGroups | None = None) -> list[KafkaListener]:
    """Every Kafka listener the flags ask for (plaintext, SASL_SSL, SSL), sharing connection
    counts and budgets (kafka_tls.py)."""
    cfg = services.config
    if not (cfg.kafka_listen or cfg.kafka_sasl_ssl_listen or cfg.kafka_ssl_listen):
        return []
    # Imported only here: the Kafka protocol's codecs (kio, ~0.1 s of CPU) are the largest
    # import of a broker that serves HTTP alone, as most of the test suite's brokers do.
    from ingest.kafka.listener import ListenerShared
    from ingest.kafka.tls_listeners import tls_listeners

    plain = kafka_listener(services, groups)
    listeners = [plain] if plain is not None else []
    shared = plain.shared if plain is not None else ListenerShared(services)
    listeners += tls_listeners(services, groups, shared)
    return listeners
