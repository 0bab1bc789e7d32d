"""The fetch node's view of a leader's offsets (fetch/replicas.py `hot_offsets`), read from the
document the leader really serves (ingest/service/partition_stats.py `led_stats`).

Found by a chaos run in CI: while a leader could not read the cold manifest (its link to
Postgres cut), its describe entry carried null lag figures, and every cold fetch through a
fetch node answered 500 (TypeError) until the link came back.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cluster.metadata_cache import MetadataCache, TopicView
from fetch.replicas import HotOffsets, ReplicaRouter
from ingest.log.index import LogIndex
from ingest.log.local_log import LocalLog, LogConfig
from ingest.replication.partition import Partition
from ingest.service.partition_stats import led_stats
from metadata.configs import topic_config
from metadata.types import PartitionRecord, TopicInfo

TOPIC = "orders"


def _led_entry(tmp_path: Path, *, manifest_readable: bool) -> dict[str, Any]:
    """A leader's describe entry for a real, empty log, as /internal/topics/{t}/led sends it."""
    index = LogIndex(str(tmp_path / "index"))
    log = LocalLog.open(str(tmp_path / "p0"), TOPIC, str(uuid.uuid4()), 0, index, LogConfig())
    try:
        state = cast(Partition, SimpleNamespace(log=log, high_watermark=0))
        tier = SimpleNamespace(tiered_end=0) if manifest_readable else None
        entry = led_stats(state, tiering=True, tier=cast(Any, tier), stable=None)
        doc: dict[str, Any] = orjson.loads(orjson.dumps(entry))
        return doc
    finally:
        log.close()
        index.close()


def test_offsets_are_read_while_the_leader_cannot_read_the_manifest(tmp_path: Path) -> None:
    entry = _led_entry(tmp_path, manifest_readable=False)
    assert entry["tiering_lag_bytes"] is None and entry["last_stable_offset"] is None
    assert HotOffsets.parse(entry) == {
        "log_start_offset": 0,
        "high_watermark": 0,
        "log_end_offset": 0,
    }


def test_an_entry_without_integer_offsets_is_unknown_not_an_error() -> None:
    good = {"log_start_offset": 3, "high_watermark": 9, "log_end_offset": 10}
    assert HotOffsets.parse(good) == good
    assert HotOffsets.parse({**good, "high_watermark": None}) is None
    assert HotOffsets.parse({**good, "log_start_offset": "3"}) is None
    assert HotOffsets.parse({"high_watermark": 9}) is None
    assert HotOffsets.parse([1, 2]) is None
    assert HotOffsets.parse(None) is None


def test_the_router_answers_offsets_from_a_leader_with_null_lag_figures(tmp_path: Path) -> None:
    """End to end through the router: the leader's real document over HTTP, the router's own
    cache and parsing."""
    entry = _led_entry(tmp_path, manifest_readable=False)

    async def led(request: Request) -> Response:
        assert request.path_params["topic"] == TOPIC
        return Response(orjson.dumps({"0": entry}), media_type="application/json")

    leader = Starlette(routes=[Route("/internal/topics/{topic}/led", led)])
    info = TopicInfo(str(uuid.uuid4()), TOPIC, 1, 1, {}, datetime.now(UTC))
    record = PartitionRecord(TOPIC, info.id, 0, 1, 0, [1], [1], 0)
    view = TopicView(info, topic_config({}), [record])
    cache = cast(MetadataCache, SimpleNamespace(leader_url=lambda v, p: "http://leader"))

    async def ask() -> HotOffsets | None:
        router = ReplicaRouter(cache, lambda: "secret", 5.0)
        await router.close()
        router._client = httpx.AsyncClient(transport=httpx.ASGITransport(app=leader))
        try:
            return await router.hot_offsets(view, 0)
        finally:
            await router.close()

    assert asyncio.run(ask()) == {"log_start_offset": 0, "high_watermark": 0, "log_end_offset": 0}
