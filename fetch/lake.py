"""`GET /topics/{topic}/lake`: a topic's Delta table as the cold tier holds it (docs/design.md §4).

The live data files come from the Postgres manifest (committed rows: each file's offset and
timestamp range, size, records and the Delta version that added it); the versions come from
the Delta log entries in S3 (coldstore/delta_history.py), newest first, a page at a time.
Served by brokers and fetch nodes alike (mounted by the composition root), with the same auth
as the rest: DESCRIBE on the topic, as Kafka's DescribeConfigs/ListOffsets.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse, error_response, query_int
from cluster.metadata_cache import MetadataCache, TopicView
from coldstore.delta_columns import ColumnVersions
from coldstore.delta_history import DeltaCommit, DeltaHistory
from coldstore.layout import table_key, table_uri
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from logformat.errors import ErrorCode, TierlogError
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.types import ColdFile

DEFAULT_VERSIONS = 50
MAX_VERSIONS = 500
MAX_VERSION = 2**62
THREADS = 4


def _file(f: ColdFile, root: str) -> dict[str, Any]:
    prefix = root + "/"
    return {
        "path": f.object_key[len(prefix) :] if f.object_key.startswith(prefix) else f.object_key,
        "partition": f.partition,
        "first_offset": f.base_offset,
        "last_offset": f.last_offset,
        "min_timestamp": f.min_timestamp,
        "max_timestamp": f.max_timestamp,
        "size_bytes": f.size_bytes,
        "records": f.records,
        "delta_version": f.delta_version,
    }


def _commit(c: DeltaCommit) -> dict[str, Any]:
    return {
        "version": c.version,
        "timestamp": c.timestamp,
        "operation": c.operation,
        "files_added": c.files_added,
        "files_removed": c.files_removed,
        "bytes_added": c.bytes_added,
        "bytes_removed": c.bytes_removed,
        "records_added": c.records_added,
        "offset_ranges": [r._asdict() for r in c.added_ranges],
    }


def _partitions(files: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """Per partition: the offsets its live files cover, how many files and bytes."""
    out = []
    for p in range(count):
        mine = [f for f in files if f["partition"] == p]
        out.append(
            {
                "partition": p,
                "first_offset": min((f["first_offset"] for f in mine), default=None),
                "last_offset": max((f["last_offset"] for f in mine), default=None),
                "files": len(mine),
                "size_bytes": sum(f["size_bytes"] for f in mine),
                "records": sum(f["records"] for f in mine),
            }
        )
    return out


class LakeEndpoint:
    """The /topics/{topic}/lake route over one node's metadata cache, Postgres and S3."""

    def __init__(
        self, database_url: str, cache: MetadataCache, store_config: ObjectStoreConfig | None
    ) -> None:
        self._cache = cache
        self._config = store_config
        self._engine = make_engine(database_url, pool_size=THREADS, max_overflow=0)
        self._manifest = ColdManifest(self._engine)
        self._store = ObjectStore(store_config) if store_config is not None else None
        self._executor = ThreadPoolExecutor(THREADS, thread_name_prefix="tierlog-lake")
        self._columns: dict[str, ColumnVersions] = {}  # per table root: log entries read
        self.routes = [Route("/topics/{topic}/lake", self.describe, methods=["GET"])]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)
            if self._store is not None:
                self._store.close()
            self._engine.dispose()

    async def describe(self, request: Request) -> Response:
        try:
            return JSONResponse(await self._describe(request))
        except TierlogError as exc:
            return error_response(exc)

    async def _describe(self, request: Request) -> dict[str, Any]:
        topic = request.path_params["topic"]
        auth.require(request, "topic", topic, "describe")
        unknown = sorted(set(request.query_params) - {"limit", "before"})
        if unknown:
            raise TierlogError(
                ErrorCode.INVALID_REQUEST, f"unknown query parameter(s): {', '.join(unknown)}"
            )
        limit = query_int(request, "limit", DEFAULT_VERSIONS, 1, MAX_VERSIONS)
        before = query_int(request, "before", MAX_VERSION, 0, MAX_VERSION)
        view = await self._cache.require_topic(topic)
        if self._config is None or self._store is None:
            raise TierlogError(
                ErrorCode.KAFKA_STORAGE_ERROR, "this node has no S3 configured: no Delta tables"
            )
        root = table_key(self._config, topic)
        files = [_file(f, root) for f in await self._run(self._files, view)]
        history = DeltaHistory(self._store, root)
        try:
            versions = await self._run(history.versions)
            page = [v for v in reversed(versions) if v < before][:limit]
            commits = await self._run(history.commits, page)
            known = self._columns.setdefault(root, ColumnVersions())
            columns = await self._run(known.columns, history, versions)
        except TierlogError:
            raise
        except Exception as exc:  # S3 unreachable or refusing: say so, never a 500
            raise TierlogError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"reading the Delta log of {topic!r}: {exc}"
            ) from None
        older = [v for v in versions if v < (page[-1] if page else before)]
        return {
            "topic": topic,
            "table_uri": table_uri(self._config, topic),
            "remote_storage_enable": view.config.remote_storage_enable,
            "version": versions[-1] if versions else None,
            "files": files,
            "partitions": _partitions(files, len(view.partitions)),
            "totals": {
                "files": len(files),
                "size_bytes": sum(f["size_bytes"] for f in files),
                "records": sum(f["records"] for f in files),
            },
            "columns": [c._asdict() for c in columns],
            "versions": [_commit(c) for c in commits],
            "next_before": page[-1] if page and older else None,
        }

    def _files(self, view: TopicView) -> list[ColdFile]:
        return self._manifest.topic_files(view.info.id)

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
