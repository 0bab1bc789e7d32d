"""Entries per request (ingest/service/request_counts.py), counted on the decoded request
before its handler runs; a request over its bound is answered INVALID_REQUEST in every entry
it named (error_response.py, in a worker thread: the entries may be many), and nothing of it
is done."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode as KafkaError

from ingest.data_limits import DataLimits
from ingest.kafka.error_response import error_response
from ingest.kafka.offload import offload
from ingest.kafka.protocol import CREATE_TOPICS, FETCH, LIST_OFFSETS, METADATA
from ingest.service.request_counts import check_count
from logformat.errors import TierlogError

_NAMES = {CREATE_TOPICS: "CreateTopics", METADATA: "Metadata", FETCH: "Fetch"}
_NAMES[LIST_OFFSETS] = "ListOffsets"


def _count(api_key: int, request: Any) -> int:
    if api_key in (CREATE_TOPICS, METADATA):
        return len(request.topics or ())
    return sum(len(t.partitions) for t in request.topics)


async def refusal(api_key: int, request: Any, response_cls: Any, limits: DataLimits) -> Any:
    """The error answer to a request naming too many entries; None when it is within bounds."""
    name = _NAMES.get(api_key)
    if name is None:
        return None
    try:
        check_count(name, _count(api_key, request), limits)
    except TierlogError as exc:
        return await offload(
            error_response, response_cls, request, KafkaError.invalid_request, exc.message
        )
    return None
