"""`tierlog fetch`: a fetch node and its HTTP application, served until SIGINT/SIGTERM."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence

from starlette.routing import BaseRoute

from cluster.extension import Extension, running
from cluster.http.server import run_server
from cluster.read_contract import ColdReader
from fetch.node import FetchNode, FetchNodeConfig
from fetch.node_api import build_app

NodeExtensionFactory = Callable[[FetchNode], Extension]


def serve(
    config: FetchNodeConfig,
    cold: ColdReader | None,
    extensions: Sequence[NodeExtensionFactory] = (),
) -> None:
    """Run a fetch node until SIGINT/SIGTERM. `extensions` (from the composition root) add
    routes and background duties, as on a broker (cluster/extension.py): consumer groups."""
    node = FetchNode(config, cold)
    added = [make(node) for make in extensions]

    @contextlib.asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        await node.start()
        try:
            async with running(added):
                yield
        finally:
            await node.stop()

    routes: list[BaseRoute] = [r for ext in added for r in ext.routes]
    run_server(
        build_app(node, routes, lifespan),
        config.host,
        config.port,
        config.tls_cert,
        config.tls_key,
        config.http_limits,
    )
