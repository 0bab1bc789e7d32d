"""Consumer-group rows and their JSON fields as the group store's types
(metadata/groups.py): a group row, a member row, and the Kafka protocol state kept in JSONB
(a classic round, a member's Kafka membership), with bytes as base64."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Row

from metadata.types import (
    ConsumerGroupMember,
    GroupRow,
    KafkaMembership,
    KafkaRound,
    PartitionMap,
    TopicMeta,
)

AnyRow = Row[*tuple[Any, ...]]


def partition_map(doc: Any) -> PartitionMap:
    return {str(t): sorted(int(p) for p in ps) for t, ps in (doc or {}).items()}


def b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode()


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def round(doc: Any) -> KafkaRound | None:
    if doc is None:
        return None
    deadline = doc["deadline"]
    return KafkaRound(
        int(doc["generation"]),
        str(doc["phase"]),
        doc["leader"],
        doc["protocol"],
        tuple(doc["members"]),
        None if deadline is None else datetime.fromisoformat(deadline),
    )


def round_doc(r: KafkaRound | None) -> dict[str, Any] | None:
    if r is None:
        return None
    deadline = None if r.deadline is None else r.deadline.isoformat()
    return {**r._asdict(), "members": list(r.members), "deadline": deadline}


def membership(doc: Any) -> KafkaMembership | None:
    if doc is None:
        return None
    return KafkaMembership(
        tuple((str(name), unb64(meta) or b"") for name, meta in doc["protocols"]),
        doc["generation"],
        unb64(doc["assignment"]),
        int(doc["rebalance_timeout_ms"]),
    )


def membership_doc(k: KafkaMembership | None) -> dict[str, Any] | None:
    if k is None:
        return None
    return {
        "protocols": [[name, b64(meta)] for name, meta in k.protocols],
        "generation": k.generation,
        "assignment": b64(k.assignment),
        "rebalance_timeout_ms": k.rebalance_timeout_ms,
    }


def group_of(row: AnyRow) -> GroupRow:
    subscribed = {str(t): TopicMeta(str(v[0]), int(v[1])) for t, v in row.subscribed.items()}
    return GroupRow(
        row.id,
        row.name,
        row.group_epoch,
        row.assignor,
        row.state,
        subscribed,
        row.created_at,
        round(row.kafka),
    )


def member_of(row: AnyRow) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        row.member_id,
        row.member_epoch,
        tuple(row.topics),
        row.assignor,
        row.session_timeout_ms,
        row.joined_at,
        row.last_heartbeat_at,
        row.session_expires_at,
        partition_map(row.target),
        partition_map(row.assigned),
        partition_map(row.owned),
        membership(row.kafka),
    )


def member_values(m: ConsumerGroupMember) -> dict[str, object]:
    return {
        "member_epoch": m.member_epoch,
        "topics": list(m.topics),
        "assignor": m.assignor,
        "session_timeout_ms": m.session_timeout_ms,
        "joined_at": m.joined_at,
        "last_heartbeat_at": m.last_heartbeat_at,
        "session_expires_at": m.session_expires_at,
        "target": m.target,
        "assigned": m.assigned,
        "owned": m.owned,
        "kafka": membership_doc(m.kafka),
    }
