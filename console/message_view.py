"""Records as the Messages page shows them, and browsing: where each partition's read
starts (the beginning, the end, an offset, a time) and the records from there.

Records are asked for with value_format=base64, so the bytes arrive exactly; shown as
pretty-printed JSON when they are a JSON object or array, as text when they are UTF-8, and
as hex or base64 otherwise."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any, NamedTuple

from console.cluster_api import ClusterApi, ConsoleApiError
from console.topic_details import topic_path

POSITIONS = ("beginning", "end", "offset", "timestamp")
BINARY_FORMATS = ("hex", "base64")
MAX_LIMIT = 500


class Payload(NamedTuple):
    kind: str  # null | json | text | binary
    text: str
    size: int  # bytes


class Browse(NamedTuple):
    """What to read: a partition (None: all) from a position."""

    topic: str
    partition: int | None
    position: str
    offset: int
    timestamp: int | None  # ms
    limit: int


def payload(b64: str | None, binary: str = "hex") -> Payload:
    if b64 is None:
        return Payload("null", "null", 0)
    raw = base64.b64decode(b64)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        shown = raw.hex(" ") if binary == "hex" else b64
        return Payload("binary", shown, len(raw))
    if text[:1] in ("{", "[") or text.lstrip()[:1] in ("{", "["):
        try:
            doc = json.loads(text)
        except ValueError:
            pass
        else:
            return Payload("json", json.dumps(doc, indent=2, ensure_ascii=False), len(raw))
    return Payload("text", text, len(raw))


def time_text(ms: int) -> str:
    """A record's time for people; a timestamp no calendar date holds (written by a client
    before produce checked them, issue 24 K4) shows as its number, not as a failed page."""
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, ValueError, OSError):
        return f"out of range ({ms} ms)"


def record_view(rec: dict[str, Any], partition: int, binary: str) -> dict[str, Any]:
    """A fetched or found record (value_format=base64) as the row templates show it."""
    headers = rec.get("headers") or []
    if isinstance(headers, dict):  # {name: text}: a fetch with another value_format
        headers = [
            {"key": k, "value_b64": base64.b64encode(str(v).encode()).decode()}
            for k, v in headers.items()
        ]
    ts = int(rec["timestamp"])
    return {
        "partition": partition,
        "offset": rec["offset"],
        "timestamp": ts,
        "time": time_text(ts),
        "key": payload(rec.get("key_b64"), binary),
        "key_b64": rec.get("key_b64"),
        "value": payload(rec.get("value_b64"), binary),
        "headers": [(h["key"], payload(h.get("value_b64"), binary)) for h in headers],
        "tier": rec.get("tier"),
    }


def parse_time(raw: str) -> int:
    """A time as ms since the epoch: an integer, or an ISO date-time (UTC unless it says)."""
    raw = raw.strip()
    if raw.isdigit():
        return int(raw)
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise ConsoleApiError(
            "INVALID_REQUEST", f"{raw!r} is not a time (ms, or 2026-11-25T10:00:00)", 400
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def decode_key_b64(raw: str) -> str:
    try:
        base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise ConsoleApiError("INVALID_REQUEST", "the key is not valid base64", 400) from None
    return raw


async def _start(api: ClusterApi, key: str | None, b: Browse, p: int) -> int | None:
    """Where partition p's read starts (None: nothing at or after the time asked)."""
    offsets = topic_path(b.topic, "partitions", str(p), "offsets")
    if b.position == "offset":
        return b.offset
    if b.position == "timestamp":
        doc = await api.get(offsets, key, at=str(b.timestamp))
        return None if doc.get("offset") is None else int(doc["offset"])
    doc = await api.get(offsets, key, at="latest")
    if b.position == "end":
        return max(int(doc["log_start_offset"]), int(doc["high_watermark"]) - b.limit)
    return int(doc["log_start_offset"])


async def _read(
    api: ClusterApi, key: str | None, b: Browse, p: int, binary: str
) -> tuple[list[dict[str, Any]], int | None]:
    start = await _start(api, key, b, p)
    if start is None:
        latest = await api.get(
            topic_path(b.topic, "partitions", str(p), "offsets"), key, at="latest"
        )
        return [], int(latest["high_watermark"])
    doc = await api.get(
        topic_path(b.topic, "partitions", str(p), "records"),
        key,
        offset=start,
        max_records=b.limit,
        value_format="base64",
    )
    rows = [record_view(r, p, binary) for r in doc["records"]]
    return rows, int(doc["next_offset"])


async def browse(
    api: ClusterApi, key: str | None, b: Browse, partitions: list[int], binary: str
) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """Up to `limit` records (of all the partitions, by time) and each partition's next
    offset (where a live tail continues)."""
    got = await asyncio.gather(*(_read(api, key, b, p, binary) for p in partitions))
    rows = sorted(
        (r for part, _ in got for r in part),
        key=lambda r: (r["timestamp"], r["partition"], r["offset"]),
    )
    rows = rows[-b.limit :] if b.position == "end" else rows[: b.limit]
    nexts = {p: n for p, (_, n) in zip(partitions, got, strict=True) if n is not None}
    return rows, nexts


async def tail(
    api: ClusterApi, key: str | None, topic: str, nexts: dict[int, int], binary: str
) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """Records after each partition's next offset (a live tail's poll)."""

    async def one(p: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        doc = await api.get(
            topic_path(topic, "partitions", str(p), "records"),
            key,
            offset=offset,
            max_records=100,
            value_format="base64",
        )
        return [record_view(r, p, binary) for r in doc["records"]], int(doc["next_offset"])

    got = await asyncio.gather(*(one(p, o) for p, o in nexts.items()))
    rows = sorted((r for part, _ in got for r in part), key=lambda r: (r["timestamp"], r["offset"]))
    return rows, {p: n for p, (_, n) in zip(nexts, got, strict=True)}


def encode_nexts(nexts: dict[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(nexts.items()))


def decode_nexts(raw: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for part in filter(None, raw.split(",")):
        p, _, o = part.partition(":")
        if not (p.isdigit() and o.isdigit()):
            raise ConsoleApiError(
                "INVALID_REQUEST", f"bad position {part!r} (partition:offset)", 400
            )
        out[int(p)] = int(o)
    return out
