"""The erasure request's rules (issue 31): which keys a request may name, and accepting it.

A body is {"keys": ["text", ...], "keys_b64": ["base64", ...]} (either or both: UTF-8 text
keys, base64 for binary ones, as search's key/key_b64), 1 to 10,000 keys in all. A bad body
is refused with 422 before anything is stored or started. Accepting records, per partition,
the log end offset at that moment: the request erases what exists then; a record produced
with one of the keys afterwards is kept (an erasure does not ban a key).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ingest.service.topic_describe import describe
from logformat.errors import ErrorCode, TierlogError
from metadata.erasures import MAX_KEYS, Erasure, ErasureRepo

if TYPE_CHECKING:
    from ingest.broker import Broker

FIELDS = ("keys", "keys_b64")


class ErasureRequestError(TierlogError):
    """A well-formed body that names no valid key list: INVALID_REQUEST, HTTP 422."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, f"{message}; no erasure was started")

    @property
    def http_status(self) -> int:
        return 422


def _strings(doc: Mapping[str, Any], field: str) -> list[str]:
    value = doc.get(field, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ErasureRequestError(f'"{field}" must be a list of strings')
    return value


def parse_keys(doc: Mapping[str, Any]) -> list[bytes]:
    """The distinct keys a request body names, in order."""
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise ErasureRequestError(f"unknown field(s) {', '.join(unknown)}: give keys or keys_b64")
    text, encoded = _strings(doc, "keys"), _strings(doc, "keys_b64")
    total = len(text) + len(encoded)
    if not 1 <= total <= MAX_KEYS:
        raise ErasureRequestError(f"an erasure names 1 to {MAX_KEYS} keys; this one names {total}")
    keys = [k.encode() for k in text]
    for i, value in enumerate(encoded):
        try:
            keys.append(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            raise ErasureRequestError(
                f"keys_b64[{i}] is not valid base64: {value[:40]!r}"
            ) from None
    return list(dict.fromkeys(keys))


def accept(
    repo: ErasureRepo,
    topic_id: str,
    topic: str,
    keys: list[bytes],
    principal: str,
    end_offsets: Mapping[int, int],
) -> Erasure:
    """Store the request (pending): the erasure workers on brokers and compaction pick it up."""
    return repo.create(topic_id, topic, keys, principal, end_offsets)


class Erasures:
    """The erasure requests of the HTTP API (ingest/api/erasures.py): accepting one after the
    topic's DELETE right is checked, reading one or a topic's list after DESCRIBE."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.repo = ErasureRepo(broker.engine)

    async def create(self, principal: str, topic: str, doc: Mapping[str, Any]) -> Erasure:
        broker = self._broker
        broker.authorizer.require(principal, "topic", topic, "delete")
        view = await broker.cache.require_topic(topic)
        keys = parse_keys(doc)
        described = await describe(broker, view)
        ends = {
            p["partition"]: p["log_end_offset"]
            for p in described["partitions"]
            if p["log_end_offset"] is not None
        }
        return await asyncio.to_thread(
            accept, self.repo, view.info.id, topic, keys, principal, ends
        )

    async def get(self, principal: str, topic: str, erasure_id: str) -> Erasure:
        self._broker.authorizer.require(principal, "topic", topic, "describe")
        found = await asyncio.to_thread(self.repo.get, topic, erasure_id)
        if found is None:
            raise TierlogError(
                ErrorCode.NOT_FOUND, f"topic {topic!r} has no erasure {erasure_id!r}"
            )
        return found

    async def list(self, principal: str, topic: str, limit: int) -> list[Erasure]:
        self._broker.authorizer.require(principal, "topic", topic, "describe")
        return list(await asyncio.to_thread(self.repo.list, topic, limit))
