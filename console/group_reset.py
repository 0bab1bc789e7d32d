"""The Groups page's offset-reset form → the body of POST /groups/{g}/offsets/reset.

Kafka's reset choices: to the earliest or latest offset, to the first record at or after a
time, or to an offset; for one partition of a topic or all of them. A preview is the same
request with dry_run (the API computes the offsets and writes nothing).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from console.cluster_api import ConsoleApiError

TARGETS = ("earliest", "latest", "datetime", "offset")
FIELDS = ("topic", "partition", "to", "value")


def _bad(message: str) -> ConsoleApiError:
    return ConsoleApiError("INVALID_REQUEST", message, 400)


def _ms(text: str) -> int:
    """ISO 8601 (UTC unless it says otherwise; a browser's datetime-local is taken as UTC) or
    milliseconds since the epoch."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise _bad(f"not a date and time (ISO 8601) or milliseconds: {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _int(text: str, what: str) -> int:
    if not text.isdigit():
        raise _bad(f"{what} must be a whole number >= 0, got {text!r}")
    return int(text)


def reset_body(form: dict[str, str], partitions_of_topic: int | None) -> dict[str, Any]:
    """The API body for the form; `partitions_of_topic` (the topic's partition count) is
    needed only to reset every partition to one offset."""
    topic = form.get("topic", "").strip()
    if not topic:
        raise _bad("choose a topic")
    raw_partition = form.get("partition", "").strip()
    partition = _int(raw_partition, "partition") if raw_partition else None
    to = form.get("to", "")
    if to not in TARGETS:
        raise _bad(f"reset to one of {', '.join(TARGETS)}, not {to!r}")
    value = form.get("value", "").strip()
    scope: dict[str, Any] = (
        {"partitions": [{"topic": topic, "partition": partition}]}
        if partition is not None
        else {"topics": [topic]}
    )
    if to in ("earliest", "latest"):
        return {"at": to, **scope}
    if not value:
        raise _bad("give a date and time" if to == "datetime" else "give an offset")
    if to == "datetime":
        return {"at": _ms(value), **scope}
    offset = _int(value, "offset")
    if partition is not None:
        targets = [partition]
    elif partitions_of_topic is not None:
        targets = list(range(partitions_of_topic))
    else:
        raise _bad(f"unknown topic {topic!r}")
    return {"offsets": [{"topic": topic, "partition": p, "offset": offset} for p in targets]}
