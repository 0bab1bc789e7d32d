"""High watermarks and offset lookups for the group routes, from any node that knows the
cluster's metadata (a broker or a fetch node).

High watermarks are not in Postgres: only a partition's leader knows its current one. A
partition led here is read in process (``local_hw``); others are asked of their leader, one
internal request per (leader, topic) — the endpoint describe uses. Offsets at earliest,
latest or a timestamp come from the leader's public list-offsets endpoint, so they are
whatever that endpoint answers (hot and cold).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

import httpx
import orjson

from cluster.internal_http import (
    internal_async_client,
)
from cluster.metadata_cache import MetadataCache
from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicNamePartition

LocalHighWatermark = Callable[[str, int], int | None]  # None: not led here


class ClusterOffsets:
    def __init__(
        self,
        cache: MetadataCache,
        token: Callable[[], str],
        local_hw: LocalHighWatermark | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self._cache = cache
        self._token = token
        self._local_hw = local_hw
        self._http = internal_async_client(token, httpx.Timeout(timeout_s, connect=2.0))

    async def close(self) -> None:
        await self._http.aclose()

    def _leader_url(self, topic: str, partition: int) -> str | None:
        view = self._cache.topic(topic)
        if view is None or not 0 <= partition < len(view.partitions):
            return None
        leader = view.partitions[partition].leader
        return self._cache.broker_url(leader) if leader is not None else None

    async def high_watermarks(
        self, partitions: Sequence[TopicNamePartition]
    ) -> Mapping[TopicNamePartition, int | None]:
        out: dict[TopicNamePartition, int | None] = dict.fromkeys(partitions)
        remote: dict[tuple[str, str], list[TopicNamePartition]] = {}
        for tp in partitions:
            hw = self._local_hw(tp.topic, tp.partition) if self._local_hw else None
            if hw is not None:
                out[tp] = hw
                continue
            url = self._leader_url(tp.topic, tp.partition)
            if url is not None:
                remote.setdefault((url, tp.topic), []).append(tp)

        async def ask(url: str, topic: str, wanted: list[TopicNamePartition]) -> None:
            try:
                response = await self._http.get(
                    f"{url}/internal/topics/{topic}/led",
                )
                response.raise_for_status()
                doc = orjson.loads(response.content)
            except (httpx.HTTPError, orjson.JSONDecodeError):
                return  # an unreachable leader: lag unknown (null) rather than an error
            for tp in wanted:
                entry = doc.get(str(tp.partition)) if isinstance(doc, dict) else None
                if isinstance(entry, dict) and isinstance(entry.get("high_watermark"), int):
                    out[tp] = entry["high_watermark"]

        await asyncio.gather(*(ask(url, t, tps) for (url, t), tps in remote.items()))
        return out

    async def resolve(self, tp: TopicNamePartition, at: str | int) -> int | None:
        """The partition's offset at "earliest", "latest" or a timestamp (ms)."""
        url = self._leader_url(tp.topic, tp.partition)
        if url is None:
            raise TierlogError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"{tp.topic}-{tp.partition} has no leader now"
            )
        try:
            response = await self._http.get(
                f"{url}/topics/{tp.topic}/partitions/{tp.partition}/offsets",
                params={"at": str(at)},
            )
            doc = orjson.loads(response.content)
        except (httpx.HTTPError, orjson.JSONDecodeError) as exc:
            raise TierlogError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"cannot reach the leader at {url}: {exc}"
            ) from None
        if response.status_code != 200 or not isinstance(doc, dict):
            name = doc.get("error_code") if isinstance(doc, dict) else None
            code = ErrorCode.__members__.get(name or "", ErrorCode.LEADER_NOT_AVAILABLE)
            raise TierlogError(
                code,
                f"list offsets of {tp.topic}-{tp.partition} at {at}: HTTP {response.status_code}",
            )
        offset = doc.get("offset")
        return offset if isinstance(offset, int) else None

    async def record_timestamp(self, tp: TopicNamePartition, offset: int) -> int | None:
        """The timestamp (ms) of the record at ``offset``, read through the leader like any
        fetch (hot or cold); a gap left by compaction gives the next record's. An offset
        already deleted by retention gives the log start's record: that is the oldest record
        the group has not consumed. None when unknown (no leader, unreachable, no record)."""
        url = self._leader_url(tp.topic, tp.partition)
        if url is None:
            return None
        for attempt in (offset, None):
            try:
                if attempt is None:
                    attempt = await self.resolve(tp, "earliest")
                    if attempt is None or attempt <= offset:
                        return None
                response = await self._http.get(
                    f"{url}/topics/{tp.topic}/partitions/{tp.partition}/records",
                    params={"offset": attempt, "max_records": 1, "value_format": "base64"},
                    headers={"accept": "application/json"},
                )
                doc = orjson.loads(response.content)
            except (httpx.HTTPError, orjson.JSONDecodeError, TierlogError):
                return None
            if response.status_code == 200 and isinstance(doc, dict):
                records = doc.get("records")
                first = records[0] if isinstance(records, list) and records else None
                ts = first.get("timestamp") if isinstance(first, dict) else None
                return ts if isinstance(ts, int) else None
            if response.status_code != 416:  # OFFSET_OUT_OF_RANGE: retried at the log start
                return None
        return None
