"""Where a fetch node sends what it does not read from S3 itself: the brokers.

- Hot fetches go to an in-sync follower when there is a live one (Kafka's KIP-392 follower
  fetching, so replay load stays off the leader), else to the leader; a replica that answers
  KAFKA_STORAGE_ERROR (a frame failed its CRC check there) is passed over for the next. The
  request carries the cluster credential and the replica-read header; a follower that cannot
  serve it (out of the ISR, or the offset is past its high watermark) forwards it to the
  leader itself (one hop).
- Offsets and admin reads go to the leader or to any live broker, as a client's would.
- The partition's high watermark and hot log start, which cold answers must carry too, come
  from the leader's internal offsets endpoint, cached for a moment.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote

import httpx
import orjson
from starlette.requests import Request
from starlette.responses import Response

from cluster.http.fetch_response import ARROW_STREAM, REPLICA_READ_HEADER
from cluster.internal_http import forwarded_path, internal_async_client
from cluster.metadata_cache import MetadataCache, TopicView
from cluster.search_relay import leader_lines
from fetch.cold import metrics
from logformat.errors import ErrorCode, TierlogError

_KEEP_HEADERS = (
    "content-type",
    "x-tierlog-leader",
    "x-tierlog-next-offset",
    "x-tierlog-high-watermark",
    "x-tierlog-log-start-offset",
)
OFFSETS_TTL_S = 0.5


def _storage_error(response: Response) -> bool:
    """A replica's 503 KAFKA_STORAGE_ERROR: its disk could not serve the read."""
    return response.status_code == 503 and b'"KAFKA_STORAGE_ERROR"' in response.body[:512]


class HotOffsets(dict[str, int]):
    """{"log_start_offset", "high_watermark", "log_end_offset"} of a partition's leader."""

    KEYS = ("log_start_offset", "high_watermark", "log_end_offset")

    @classmethod
    def parse(cls, entry: object) -> HotOffsets | None:
        """The offsets out of a leader's describe entry, None unless all are integers. The
        entry carries more (lag figures, the last stable offset) that may be null while the
        leader cannot read the manifest: those are not offsets and are not read here."""
        if not isinstance(entry, dict):
            return None
        got = {k: v for k in cls.KEYS if type(v := entry.get(k)) is int}
        return cls(got) if len(got) == len(cls.KEYS) else None


class ReplicaRouter:
    def __init__(self, cache: MetadataCache, token: Callable[[], str], timeout_s: float) -> None:
        self._cache, self._token = cache, token
        self._client = internal_async_client(token, httpx.Timeout(timeout_s + 5, connect=2.0))
        self._offsets: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}

    async def close(self) -> None:
        await self._client.aclose()

    def _alive(self, broker_id: int) -> str | None:
        info = self._cache.brokers.get(broker_id)
        return info.url if info is not None and info.alive else None

    def _followers(self, view: TopicView, partition: int) -> list[str]:
        """Live in-sync followers, rotated per partition so partitions spread over them."""
        p = view.partitions[partition]
        urls = [u for b in p.isr if b != p.leader and (u := self._alive(b)) is not None]
        if not urls:
            return []
        turn = zlib.crc32(f"{view.info.id}/{partition}".encode()) % len(urls)
        return urls[turn:] + urls[:turn]

    async def fetch(self, view: TopicView, partition: int, request: Request) -> Response:
        """A hot fetch, from a follower if one is in sync, else from the leader."""
        return await self._from_replicas(
            view, partition, lambda url: self._get(url, request, internal=True)
        )

    async def fetch_arrow(
        self, view: TopicView, partition: int, params: dict[str, str]
    ) -> Response:
        """A hot fetch of this node's own (a typed search's page), as an Arrow answer."""
        path = f"/topics/{quote(view.info.name, safe='')}/partitions/{partition}/records"
        headers = {"accept": ARROW_STREAM, REPLICA_READ_HEADER: "1"}

        async def get(url: str) -> Response:
            response = await self._client.get(f"{url}{path}", params=params, headers=headers)
            kept = {k: v for k, v in response.headers.items() if k.lower() in _KEEP_HEADERS}
            return Response(response.content, status_code=response.status_code, headers=kept)

        return await self._from_replicas(view, partition, get)

    async def _from_replicas(
        self, view: TopicView, partition: int, get: Callable[[str], Awaitable[Response]]
    ) -> Response:
        targets = [("follower", u) for u in self._followers(view, partition)]
        targets.append(("leader", self._cache.leader_url(view, partition)))
        last: Exception | str | None = None
        for i, (kind, url) in enumerate(targets):
            try:
                response = await get(url)
            except httpx.HTTPError as exc:
                last = exc  # that replica is unreachable: the next one
                continue
            if i < len(targets) - 1 and _storage_error(response):
                # Its copy failed a CRC check (or its log is offline): another replica's may
                # be whole. The last answer, even an error, goes back to the client as is.
                last = f"{kind} {url}: {response.body[:200]!r}"
                metrics.FAILOVERS.labels(kind).inc()
                continue
            metrics.PROXIED.labels(kind).inc()
            return response
        raise TierlogError(
            ErrorCode.LEADER_NOT_AVAILABLE,
            f"no replica of {view.info.name}-{partition} is reachable: {last}",
        )

    async def leader(self, view: TopicView, partition: int, request: Request) -> Response:
        url = self._cache.leader_url(view, partition)
        try:
            response = await self._get(url, request, internal=False)
        except httpx.HTTPError as exc:
            raise TierlogError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"cannot reach the leader at {url}: {exc}"
            ) from None
        metrics.PROXIED.labels("leader").inc()
        return response

    def search_lines(
        self, view: TopicView, partition: int, params: dict[str, str]
    ) -> AsyncIterator[dict[str, Any]]:
        """The leader's search of a partition (its hot log, here), as NDJSON documents."""
        url = f"{self._cache.leader_url(view, partition)}/topics/{quote(view.info.name, safe='')}"
        metrics.PROXIED.labels("leader").inc()
        return leader_lines(self._client, f"{url}/search", params)

    async def any_broker(self, request: Request) -> Response:
        """Admin reads (topics): any live broker answers them for the whole cluster, and
        checks the client's own key (so listings are filtered to what it may see)."""
        urls = [b.url for b in self._cache.brokers.values() if b.alive]
        for url in urls:
            try:
                response = await self._get(url, request, internal=False, as_caller=True)
            except httpx.HTTPError:
                continue
            metrics.PROXIED.labels("any").inc()
            return response
        raise TierlogError(ErrorCode.LEADER_NOT_AVAILABLE, "no broker is reachable")

    async def _get(
        self, url: str, request: Request, internal: bool, as_caller: bool = False
    ) -> Response:
        """`as_caller`: the broker authenticates and authorizes the client itself (its key
        is passed on), e.g. topic listings it filters; otherwise this node authorized the
        client and the call carries the cluster credential."""
        headers = {}
        if "accept" in request.headers:
            headers["accept"] = request.headers["accept"]
        if as_caller and "authorization" in request.headers:
            headers["authorization"] = request.headers["authorization"]
        if internal:
            headers[REPLICA_READ_HEADER] = "1"
        # `columns` is this node's to serve (fetch/typed_answers.py): brokers refuse it.
        params = httpx.QueryParams(
            [(k, v) for k, v in request.query_params.multi_items() if k != "columns"]
        )
        response = await self._client.get(
            f"{url}{forwarded_path(request)}",
            params=params,
            headers=headers,
            auth=None if as_caller else httpx.USE_CLIENT_DEFAULT,  # the caller's own key, not ours
        )
        kept = {k: v for k, v in response.headers.items() if k.lower() in _KEEP_HEADERS}
        return Response(response.content, status_code=response.status_code, headers=kept)

    async def hot_offsets(self, view: TopicView, partition: int) -> HotOffsets | None:
        """The leader's offsets for the partition (cached briefly, one call per leader and
        topic); None when unknown."""
        try:
            url = self._cache.leader_url(view, partition)
        except TierlogError:
            return None
        k = (view.info.name, url)
        hit = self._offsets.get(k)
        if hit is None or time.monotonic() - hit[0] >= OFFSETS_TTL_S:
            try:
                response = await self._client.get(
                    f"{url}/internal/topics/{view.info.name}/led",
                    timeout=2.0,
                )
                response.raise_for_status()
                doc = orjson.loads(response.content)
                if not isinstance(doc, dict):
                    raise ValueError("not an object")
                hit = (time.monotonic(), doc)
                self._offsets[k] = hit
            except (httpx.HTTPError, ValueError):
                pass  # a stale answer beats none
        return HotOffsets.parse(hit[1].get(str(partition))) if hit is not None else None
