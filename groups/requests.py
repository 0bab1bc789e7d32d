"""Group request bodies → typed requests; bad input is a 4xx TierlogError, never a crash."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from cluster.http.responses import field_int, only_fields
from groups.assignors import ASSIGNORS
from logformat.errors import ErrorCode, TierlogError
from metadata.configs import validate_topic_name
from metadata.types import TopicNamePartition

MAX_NAME = 255  # group and member ids
MAX_TOPICS = 1000  # per subscription
MAX_OFFSETS = 10_000  # per commit or reset
MAX_METADATA = 4096  # Kafka's offset.metadata.max.bytes
MIN_SESSION_MS, MAX_SESSION_MS, DEFAULT_SESSION_MS = 500, 1_800_000, 10_000
MAX_PARTITION = 2**31 - 1
MAX_OFFSET = 2**63 - 1
MAX_EPOCH = 2**31 - 1
# Postgres text cannot hold NUL, and control characters in ids only ever mean a broken client.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class JoinRequest(NamedTuple):
    topics: tuple[str, ...]  # sorted, distinct
    assignor: str | None
    session_timeout_ms: int
    member_id: str | None = None  # a KIP-848 client names itself; else the server does


class HeartbeatRequest(NamedTuple):
    member_epoch: int  # 0: the member lost its state and rejoins under its id (KIP-848)
    owned: frozenset[TopicNamePartition] | None  # None: unchanged since the last heartbeat
    topics: tuple[str, ...] | None  # a new subscription, or None to keep it


class OffsetEntry(NamedTuple):
    topic: str
    partition: int
    offset: int
    metadata: str | None


class CommitRequest(NamedTuple):
    member_id: str | None  # None ("" or absent): outside membership, only on an empty group
    member_epoch: int | None
    offsets: tuple[OffsetEntry, ...]


class ResetRequest(NamedTuple):
    at: str | int | None  # "earliest" | "latest" | timestamp ms; None with explicit offsets
    offsets: tuple[OffsetEntry, ...]  # explicit offsets (when `at` is None)
    scope: tuple[TopicNamePartition, ...] | None  # partitions named by "partitions"
    topics: tuple[str, ...] | None  # topics named by "topics" (all their partitions)
    dry_run: bool


def _bad(message: str) -> TierlogError:
    return TierlogError(ErrorCode.INVALID_REQUEST, message)


def group_name(raw: str) -> str:
    if not raw or len(raw) > MAX_NAME or _CONTROL.search(raw):
        raise TierlogError(
            ErrorCode.INVALID_GROUP_ID,
            f"a group id is 1..{MAX_NAME} characters without control characters",
        )
    return raw


def member_id(raw: object) -> str:
    if not isinstance(raw, str) or not raw or len(raw) > MAX_NAME or _CONTROL.search(raw):
        raise TierlogError(ErrorCode.UNKNOWN_MEMBER_ID, f"unknown member {raw!r}")
    return raw


def _topic_list(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_TOPICS:
        raise _bad(f"{what} must be a list of at most {MAX_TOPICS} topic names")
    return tuple(sorted({validate_topic_name(t) for t in value}))


def _partition(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PARTITION:
        raise _bad(f"{what} must be a partition number in [0, {MAX_PARTITION}], got {value!r}")
    return value


def _partition_map(value: object, what: str) -> frozenset[TopicNamePartition]:
    """{"topic": [partitions]} → a set of TopicNamePartition."""
    if not isinstance(value, dict):
        raise _bad(f'{what} must be an object {{"topic": [partitions]}}')
    out: set[TopicNamePartition] = set()
    for topic, parts in value.items():
        validate_topic_name(topic)
        if not isinstance(parts, list):
            raise _bad(f"{what}[{topic!r}] must be a list of partitions")
        out.update(TopicNamePartition(topic, _partition(p, f"{what}[{topic!r}]")) for p in parts)
    return frozenset(out)


def join(doc: dict[str, Any]) -> JoinRequest:
    only_fields(doc, ("topics", "assignor", "session_timeout_ms"))
    topics = _topic_list(doc.get("topics"), '"topics"')
    if not topics:
        raise _bad('"topics" must name at least one topic')
    assignor = doc.get("assignor")
    if assignor is not None and assignor not in ASSIGNORS:
        raise TierlogError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"assignor must be one of {', '.join(sorted(ASSIGNORS))}; got {assignor!r}",
        )
    timeout = field_int(
        doc, "session_timeout_ms", DEFAULT_SESSION_MS, MIN_SESSION_MS, MAX_SESSION_MS
    )
    return JoinRequest(topics, assignor, timeout)


def heartbeat(doc: dict[str, Any]) -> HeartbeatRequest:
    only_fields(doc, ("member_epoch", "owned", "topics"))
    epoch = field_int(doc, "member_epoch", None, 0, MAX_EPOCH)
    owned = _partition_map(doc.get("owned", {}), '"owned"')
    topics = None
    if doc.get("topics") is not None:
        topics = _topic_list(doc["topics"], '"topics"')
        if not topics:
            raise _bad('"topics" must name at least one topic (leave the group instead)')
    return HeartbeatRequest(epoch, owned, topics)


def _offset_entries(value: object, *, need_offset: bool) -> tuple[OffsetEntry, ...]:
    if not isinstance(value, list) or len(value) > MAX_OFFSETS:
        raise _bad(f'"offsets" must be a list of at most {MAX_OFFSETS} entries')
    entries: dict[TopicNamePartition, OffsetEntry] = {}
    for item in value:
        if not isinstance(item, dict):
            raise _bad('each of "offsets" must be {"topic", "partition", "offset", "metadata"}')
        only_fields(item, ("topic", "partition", "offset", "metadata"), 'an entry of "offsets"')
        topic = validate_topic_name(item.get("topic"))
        partition = _partition(item.get("partition"), '"partition"')
        offset = field_int(item, "offset", None if need_offset else 0, 0, MAX_OFFSET)
        metadata = item.get("metadata")
        if metadata is not None and not isinstance(metadata, str):
            raise _bad('"metadata" must be a string')
        if metadata is not None and (len(metadata.encode()) > MAX_METADATA or "\x00" in metadata):
            raise TierlogError(
                ErrorCode.OFFSET_METADATA_TOO_LARGE,
                f"metadata must be at most {MAX_METADATA} bytes of text without NUL",
            )
        entries[TopicNamePartition(topic, partition)] = OffsetEntry(
            topic, partition, offset, metadata
        )
    return tuple(entries[tp] for tp in sorted(entries))  # the last entry for a partition wins


def commit(doc: dict[str, Any]) -> CommitRequest:
    only_fields(doc, ("member_id", "member_epoch", "offsets"))
    raw_member = doc.get("member_id")
    offsets = _offset_entries(doc.get("offsets"), need_offset=True)
    if raw_member is None or raw_member == "":  # Kafka's "no member": "" with epoch -1
        epoch = doc.get("member_epoch", -1)
        if epoch not in (-1, None):
            raise _bad('"member_epoch" needs a "member_id"')
        return CommitRequest(None, None, offsets)
    return CommitRequest(
        member_id(raw_member), field_int(doc, "member_epoch", None, 0, MAX_EPOCH), offsets
    )


def reset(doc: dict[str, Any]) -> ResetRequest:
    only_fields(doc, ("at", "offsets", "partitions", "topics", "dry_run"))
    at = doc.get("at")
    explicit = doc.get("offsets")
    if (at is None) == (explicit is None):
        raise _bad('give either "at" (earliest, latest or a timestamp in ms) or "offsets"')
    timestamp = isinstance(at, int) and not isinstance(at, bool) and 0 <= at <= MAX_OFFSET
    if at is not None and at not in ("earliest", "latest") and not timestamp:
        raise _bad(f'"at" must be "earliest", "latest" or a timestamp in ms; got {at!r}')
    offsets = _offset_entries(explicit, need_offset=True) if explicit is not None else ()
    scope = None
    if doc.get("partitions") is not None:
        raw = doc["partitions"]
        if not isinstance(raw, list) or len(raw) > MAX_OFFSETS:
            raise _bad(f'"partitions" must be a list of at most {MAX_OFFSETS} entries')
        if not all(isinstance(p, dict) for p in raw):
            raise _bad('each of "partitions" must be {"topic", "partition"}')
        scope = tuple(
            sorted(
                {
                    TopicNamePartition(
                        validate_topic_name(p.get("topic")),
                        _partition(p.get("partition"), '"partition"'),
                    )
                    for p in raw
                }
            )
        )
    topics = None
    if doc.get("topics") is not None:
        topics = _topic_list(doc["topics"], '"topics"')
    dry_run = doc.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise _bad('"dry_run" must be true or false')
    if explicit is not None and (scope is not None or topics is not None):
        raise _bad('explicit "offsets" name their partitions: drop "partitions" and "topics"')
    return ResetRequest(at, offsets, scope, topics, dry_run)
