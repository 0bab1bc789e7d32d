"""Plain values the repositories return (immutable, cheap to pass between threads)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class BrokerInfo(NamedTuple):
    id: int
    url: str
    alive: bool  # lease_expires_at > now(), by the database's clock
    lease_expires_at: datetime
    rack: str | None = None
    incarnation: int = 0  # bumped by every register(): tells a restarted broker from the old one


class TopicInfo(NamedTuple):
    id: str  # uuid text; a re-created topic gets a new id, so stale data can be told apart
    name: str
    partition_count: int
    replication_factor: int
    configs: dict[str, str]  # overrides only, canonical strings; see configs.effective_configs
    created_at: datetime


class PartitionInfo(NamedTuple):
    topic: str
    topic_id: str
    partition: int
    leader: int | None  # None while no replica can lead
    leader_epoch: int
    replicas: list[int]  # the first is the preferred leader
    isr: list[int]
    partition_epoch: int  # bumped by every change of leader, ISR or replicas (CAS token)
