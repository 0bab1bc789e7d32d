"""`tierlog fetch`: a fetch node and its HTTP application, served until SIGINT/SIGTERM."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cluster.extension import Extension, node_lifespan, routes_of
from cluster.http.server import run_server
from cluster.notify_hub import NotifyHub
from cluster.read_contract import ColdReader
from fetch.node import FetchNode, FetchNodeConfig
from fetch.node_api import build_app

NodeExtensionFactory = Callable[[FetchNode], Extension]


def serve(
    config: FetchNodeConfig,
    cold: ColdReader | None,
    extensions: Sequence[NodeExtensionFactory] = (),
    notices: NotifyHub | None = None,
) -> None:
    """Run a fetch node until SIGINT/SIGTERM. `extensions` (from the composition root) add
    routes and background duties, as on a broker (cluster/extension.py): consumer groups."""
    node = FetchNode(config, cold, notices)
    added = [make(node) for make in extensions]

    lifespan = node_lifespan(node.start, node.stop, added)
    run_server(
        build_app(node, routes_of(added), lifespan),
        config.host,
        config.port,
        config.tls_cert,
        config.tls_key,
        config.http_limits,
    )
