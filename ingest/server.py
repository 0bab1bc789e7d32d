"""`tierlog broker`: one broker and its HTTP application, served until SIGINT/SIGTERM."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence

from cluster.extension import Extension, node_lifespan, routes_of
from cluster.http.server import run_server
from cluster.read_contract import ColdReader
from ingest.api.app import build_app
from ingest.broker import Broker
from ingest.broker_config import BrokerConfig

BrokerExtension = Callable[[Broker], Extension]


def serve(
    config: BrokerConfig,
    cold_reader: ColdReader | None = None,
    extensions: Sequence[BrokerExtension] = (),
) -> None:
    """Run one broker until SIGINT/SIGTERM."""
    broker = Broker(config, cold_reader)
    added = [make(broker) for make in extensions]

    def started() -> None:
        # Long-lived startup objects leave the GC's view; produce bodies make many young
        # objects, and default thresholds would rescan everything far too often.
        gc.collect()
        gc.freeze()

    gc.set_threshold(50_000, 20, 20)
    lifespan = node_lifespan(broker.start, broker.stop, added, started)
    app = build_app(broker, lifespan, routes_of(added))
    run_server(app, config.host, config.port, config.tls_cert, config.tls_key, config.http_limits)
