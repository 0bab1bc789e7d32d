"""`GET /topics/{topic}/search`: records by key, value substring or JSON field, across both
tiers (cluster/search_run.py), streamed as NDJSON (cluster/http/search_stream.py).

Each partition is searched by its leader: here for those this broker leads (cold files
through the cold searcher, then the local hot log), else by the leader, one hop, whose
lines are relayed. Per-key history is a key search over every offset.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cluster.http import auth
from cluster.http.search_params import SearchParams, search_params
from cluster.http.search_stream import PartitionEvents, search_response
from cluster.internal_http import FORWARDED_HEADER
from cluster.search_run import PartitionSearch
from logformat.errors import ErrorCode, TierlogError

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView
    from ingest.service.services import Services


async def search(request: Request) -> Response:
    services: Services = request.app.state.services
    topic = request.path_params["topic"]
    auth.require(request, "topic", topic, "read")
    params = search_params(request)
    view = await services.metadata.require_topic(topic, params.partition)
    partitions = range(len(view.partitions)) if params.partition is None else [params.partition]
    forwarded = FORWARDED_HEADER in request.headers
    searches = {p: _partition(services, view, p, params, request, forwarded) for p in partitions}
    return search_response(searches, params.max_hits)


def _partition(
    services: Services,
    view: TopicView,
    partition: int,
    params: SearchParams,
    request: Request,
    forwarded: bool,
) -> PartitionEvents:
    topic = view.info.name

    def events() -> AsyncIterator[dict[str, Any]]:
        s = PartitionSearch(
            view.info.id, partition, params.query, params.max_hits, params.value_format
        )
        here = services.reads.search_here(view, partition, s)
        if here is not None:
            return here
        if forwarded:  # one hop only: the sender's metadata was stale
            raise TierlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {services.config.broker_id} does not lead {topic}-{partition}",
            )
        leader = services.metadata.leader_url(view, partition)
        url = f"{leader}/topics/{quote(topic, safe='')}/search"
        query = {k: v for k, v in request.query_params.items() if k != "partition"}
        return services.forwarder.stream_lines(url, {**query, "partition": str(partition)})

    return events


routes = [Route("/topics/{topic}/search", search, methods=["GET"])]
