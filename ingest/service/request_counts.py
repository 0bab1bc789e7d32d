"""How many entries one request may name (issue 24, K8): topics per CreateTopics and per
Metadata, partitions per Fetch and per ListOffsets. Each entry costs the broker work (a
Postgres transaction, a read, an answer), and one request of 10,000 topics once created
topics for minutes; past the bound the whole request is refused, before any of it is done,
with INVALID_REQUEST in every entry and a message naming the flag."""

from __future__ import annotations

from typing import NamedTuple

from ingest.data_limits import DataLimits
from logformat.errors import ErrorCode, TierlogError


class _Bound(NamedTuple):
    field: str  # the DataLimits field
    entries: str  # what is counted
    flag: str


BOUNDS = {
    "CreateTopics": _Bound("max_create_topics", "topics", "--kafka-max-create-topics"),
    "Metadata": _Bound("max_metadata_topics", "topics", "--kafka-max-metadata-topics"),
    "Fetch": _Bound("max_fetch_partitions", "partitions", "--kafka-max-fetch-partitions"),
    "ListOffsets": _Bound(
        "max_list_offsets_partitions", "partitions", "--kafka-max-list-offsets-partitions"
    ),
}


def check_count(request: str, count: int, limits: DataLimits) -> None:
    bound = BOUNDS[request]
    limit: int = getattr(limits, bound.field)
    if count > limit:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"the {request} request names {count} {bound.entries}; the broker takes at most "
            f"{limit} per request ({bound.flag})",
        )
