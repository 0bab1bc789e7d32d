"""The Schema Registry on a node: its routes under /schema-registry, its own Postgres pool
and threads, and the listener that drops cached ids after a hard delete elsewhere.

Own pool and threads, as groups/ has: registry calls must never hold the connections or
threads a broker needs for its lease heartbeat or metadata refreshes.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from starlette.routing import Mount

from cluster.notify_hub import NotifyHub
from metadata.db import make_engine
from metadata.registry_store import REGISTRY_CHANNEL, RegistryStore
from registry.config_routes import compatibility_routes, setting_routes
from registry.http import Context
from registry.id_answers import IdAnswers
from registry.schema_routes import schema_routes
from registry.service import Registry
from schemaformat.kinds import kinds

BASE_PATH = "/schema-registry"
THREADS = 4


class RegistryMount:
    def __init__(self, database_url: str, notices: NotifyHub | None = None) -> None:
        """`notices`: the node's LISTEN connection (a private one if None)."""
        self.engine = make_engine(database_url, pool_size=THREADS, max_overflow=0)
        self.executor = ThreadPoolExecutor(THREADS, thread_name_prefix="tierlog-registry")
        ctx = Context(Registry(RegistryStore(self.engine), kinds()), self.executor)
        self.answers = IdAnswers(ctx)
        routes = [
            *schema_routes(ctx, self.answers),
            *setting_routes(ctx, "compatibility"),
            *setting_routes(ctx, "mode"),
            *compatibility_routes(ctx),
        ]
        self.routes = [Mount(BASE_PATH, routes=routes)]
        hub = notices or NotifyHub(database_url)
        self._listener = hub.subscribe(REGISTRY_CHANNEL, self.answers.forget)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self._listener.start()
        try:
            yield
        finally:
            self._listener.stop()
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.engine.dispose()
