"""`GET /topics/{topic}/search` on a fetch node (the API of ingest/api/search.py): each
partition's cold files are searched here, from S3, so a search of history does not load the
brokers; the hot log above the cold end is searched by the partition's leader, one hop,
and its lines relayed (with this node's cold progress added in)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from cluster.http import auth
from cluster.http.search_params import SearchParams, search_params
from cluster.http.search_stream import PartitionEvents, plus, search_response
from cluster.search_contract import ColdSearcher
from cluster.search_run import PartitionSearch, search_partition
from fetch.typed_answers import require_typed
from fetch.typed_search import ReplicaHot
from logformat.errors import ErrorCode, TierlogError

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView
    from fetch.node import FetchNode


async def search(request: Request) -> Response:
    node: FetchNode = request.app.state.node
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "read")
    params = search_params(request, typed=True)
    view = await node.cache.require_topic(topic, params.partition)
    if params.query.typed_path is not None:
        require_typed(view)
    parts = range(len(view.partitions)) if params.partition is None else [params.partition]
    searches = {p: _partition(node, view, p, params, request) for p in parts}
    return search_response(searches, params.max_hits)


def _partition(
    node: FetchNode, view: TopicView, partition: int, params: SearchParams, request: Request
) -> PartitionEvents:
    async def events() -> AsyncIterator[dict[str, Any]]:
        cold = node.cold if view.config.remote_storage_enable else None
        if params.query.typed_path is not None:  # hot records decoded here, not by the leader
            async for event in _typed(node, view, partition, params, cold):
                yield event
            return
        done: dict[str, Any] = {}
        if isinstance(cold, ColdSearcher):
            s = PartitionSearch(
                view.info.id, partition, params.query, params.max_hits, params.value_format
            )
            async for event in search_partition(s, cold, None):
                if event["type"] == "progress":
                    done = event
                yield event
        left = params.max_hits - int(done.get("hits", 0))
        start = max(params.query.start_offset, int(done.get("cold_end", 0)))
        if left <= 0 or start >= params.query.end_offset:
            return
        query = dict(request.query_params)
        query.update(partition=str(partition), start_offset=str(start), max_hits=str(left))
        async for event in node.router.search_lines(view, partition, query):
            yield plus(event, done) if event.get("type") == "progress" else event

    return events


async def _typed(
    node: FetchNode, view: TopicView, partition: int, params: SearchParams, cold: object
) -> AsyncIterator[dict[str, Any]]:
    hot = await node.router.hot_offsets(view, partition)
    if hot is None:
        raise TierlogError(
            ErrorCode.LEADER_NOT_AVAILABLE,
            f"the leader of {view.info.name}-{partition} cannot be asked for its hot log",
        )
    source = ReplicaHot(node, view, partition, hot["log_start_offset"], hot["high_watermark"])
    s = PartitionSearch(view.info.id, partition, params.query, params.max_hits, params.value_format)
    searcher = cold if isinstance(cold, ColdSearcher) else None
    async for event in search_partition(s, searcher, source):
        yield event
