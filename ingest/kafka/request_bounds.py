"""Entries per request (ingest/service/request_counts.py), counted on the decoded request
before its handler runs; a request over its bound is answered INVALID_REQUEST in every entry
it named (error_response.py, in a worker thread: the entries may be many), and nothing of it
is done."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as KafkaError
from kio.static.protocol import RequestPayload, ResponsePayload

from ingest.data_limits import DataLimits
from ingest.kafka.error_response import error_response
from ingest.kafka.offload import offload
from ingest.kafka.protocol import CREATE_TOPICS, FETCH, LIST_OFFSETS, METADATA
from ingest.service.request_counts import check_count
from logformat.errors import TierlogError

_NAMES = {CREATE_TOPICS: "CreateTopics", METADATA: "Metadata", FETCH: "Fetch"}
_NAMES[LIST_OFFSETS] = "ListOffsets"


def _count(api_key: int, request: RequestPayload) -> int:
    topics: tuple[object, ...] = getattr(request, "topics", None) or ()  # Metadata: None = all
    if api_key in (CREATE_TOPICS, METADATA):
        return len(topics)
    return sum(len(getattr(t, "partitions", ())) for t in topics)


async def refusal(
    api_key: int,
    request: RequestPayload,
    response_cls: type[ResponsePayload],
    limits: DataLimits,
) -> ResponsePayload | None:
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
