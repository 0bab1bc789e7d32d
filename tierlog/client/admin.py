"""Admin: topics, configs, partitions, brokers and consumer groups (docs/design.md §5).

admin = Admin("http://127.0.0.1:8080")
admin.create_topic("clicks", partitions=6, configs={"retention.ms": "86400000"})
print(admin.describe_topic("clicks").partitions[0].high_watermark)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import httpx

from logformat.errors import ErrorCode
from tierlog.client.errors import ApiError
from tierlog.client.group import group_path
from tierlog.client.lifecycle import ClientBase
from tierlog.client.metadata import topic_path
from tierlog.client.types import TopicPartition


class PartitionDescription(NamedTuple):
    partition: int
    leader: int | None
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    log_start_offset: int | None
    high_watermark: int | None
    log_end_offset: int | None


class TopicDescription(NamedTuple):
    name: str
    replication_factor: int
    configs: dict[str, Any]
    partitions: list[PartitionDescription]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TopicDescription:
        parts = [
            PartitionDescription(
                int(p["partition"]),
                p.get("leader"),
                int(p.get("leader_epoch") or 0),
                list(p.get("replicas") or []),
                list(p.get("isr") or []),
                p.get("log_start_offset"),
                p.get("high_watermark"),
                p.get("log_end_offset"),
            )
            for p in doc.get("partitions", [])
        ]
        return cls(
            doc["name"],
            int(doc.get("replication_factor") or 0),
            dict(doc.get("configs") or {}),
            parts,
        )


class TopicListing(NamedTuple):
    name: str
    partitions: int
    replication_factor: int


class BrokerInfo(NamedTuple):
    id: int
    url: str
    alive: bool
    controller: bool


class GroupOffset(NamedTuple):
    offset: int
    metadata: str
    lag: int | None  # high watermark - offset
    lag_ms: int | None = None  # age of the oldest unconsumed record (describe only)


def _group_offsets(doc: Mapping[str, Any]) -> dict[TopicPartition, GroupOffset]:
    return {
        TopicPartition(o["topic"], int(o["partition"])): GroupOffset(
            int(o["offset"]), o.get("metadata") or "", o.get("lag"), o.get("lag_ms")
        )
        for o in doc.get("offsets", [])
        if o.get("offset") is not None  # listed but never committed
    }


class GroupListing(NamedTuple):
    name: str
    state: str
    members: int
    assignor: str | None


class MemberDescription(NamedTuple):
    member_id: str
    member_epoch: int
    topics: list[str]
    assignment: frozenset[TopicPartition]


class GroupDescription(NamedTuple):
    name: str
    state: str
    group_epoch: int
    assignor: str | None
    members: list[MemberDescription]
    offsets: dict[TopicPartition, GroupOffset]
    lag: int | None
    lag_ms: int | None = None  # the oldest unconsumed record's age, over all partitions

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> GroupDescription:
        members = [
            MemberDescription(
                m["member_id"],
                int(m.get("member_epoch") or 0),
                list(m.get("topics") or []),
                frozenset(
                    TopicPartition(t, int(p))
                    for t, ps in (m.get("assignment") or {}).items()
                    for p in ps
                ),
            )
            for m in doc.get("members", [])
        ]
        return cls(
            doc["name"],
            doc.get("state", ""),
            int(doc.get("group_epoch") or 0),
            doc.get("assignor"),
            members,
            _group_offsets(doc),
            doc.get("lag"),
            doc.get("lag_ms"),
        )


class OffsetReset(NamedTuple):
    topic: str
    partition: int
    offset: int
    previous: int | None


def _ms(when: datetime | int) -> int:
    return int(when.timestamp() * 1000) if isinstance(when, datetime) else int(when)


class Admin(ClientBase):
    def __init__(
        self,
        bootstrap: str | Sequence[str] = "http://127.0.0.1:8080",
        *,
        request_timeout_ms: int = 30000,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        verify: bool | str = True,
        retry: bool = True,
    ) -> None:
        """`api_key` (default $TIERLOG_API_KEY) authenticates; `verify`: a CA path or bool.
        `retry=False`: one attempt per call, so a tool reports an unreachable node at once."""
        self.timeout_s = request_timeout_ms / 1000
        self.retry = retry
        self._open_io(
            "tierlog-admin-io",
            bootstrap,
            timeout_s=self.timeout_s,
            transport=transport,
            api_key=api_key,
            verify=verify,
        )

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        """Any API call on some node: the JSON answer, or the ApiError raised."""
        deadline = time.monotonic() + self.timeout_s
        kw: dict[str, Any] = {"params": params}
        if body is not None:
            kw["body"] = body
        return self._io.run(
            self._http.call_any(method, path, deadline=deadline, retry=self.retry, **kw)
        )

    # --- topics ---
    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
    ) -> TopicDescription:
        """The new topic; TOPIC_ALREADY_EXISTS if the name is taken, unless `exist_ok`:
        then the existing topic, whatever its partitions and configs (as `kafka-topics
        --create --if-not-exists`)."""
        body: dict[str, Any] = {"name": name, "configs": dict(configs or {})}
        if partitions is not None:
            body["partitions"] = partitions
        if replication_factor is not None:
            body["replication_factor"] = replication_factor
        try:
            return TopicDescription.from_json(self.call("POST", "/topics", body))
        except ApiError as exc:
            if not exist_ok or exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        return self.describe_topic(name)

    def list_topics(self) -> list[TopicListing]:
        return [
            TopicListing(t["name"], int(t["partitions"]), int(t["replication_factor"]))
            for t in self.call("GET", "/topics")["topics"]
        ]

    def describe_topic(self, name: str) -> TopicDescription:
        return TopicDescription.from_json(self.describe_topic_json(name))

    def describe_topic_json(self, name: str) -> dict[str, Any]:
        """The topic's document as the API answers it (every field, as `tierlog topics
        describe` prints it)."""
        doc: dict[str, Any] = self.call("GET", topic_path(name))
        return doc

    def delete_topic(self, name: str) -> None:
        self.call("DELETE", topic_path(name))

    def alter_configs(self, topic: str, configs: Mapping[str, Any]) -> TopicDescription:
        """Set configs; a None value restores the default (Kafka's incremental DELETE)."""
        return TopicDescription.from_json(self.alter_configs_json(topic, configs))

    def alter_configs_json(self, topic: str, configs: Mapping[str, Any]) -> dict[str, Any]:
        """alter_configs, answering the topic's document as the API gives it."""
        doc: dict[str, Any] = self.call(
            "PATCH", topic_path(topic) + "/configs", {"configs": dict(configs)}
        )
        return doc

    def produce_json(
        self, topic: str, records: Sequence[Mapping[str, Any]], acks: str = "all"
    ) -> Any:
        """Append records given as the JSON produce API takes them (`value_b64`, `key_b64`,
        `partition`, ...) in one request: for tools such as `tierlog produce`. Applications
        use Producer (batching, partitioning, idempotent retries)."""
        body = {"records": list(records)}
        return self.call("POST", topic_path(topic) + "/records", body, acks=acks)

    def create_partitions(self, topic: str, total: int) -> TopicDescription:
        """Grow `topic` to `total` partitions (Kafka's CreatePartitions takes the new total)."""
        doc = self.call("POST", topic_path(topic) + "/partitions", {"partitions": total})
        return TopicDescription.from_json(doc)

    def list_brokers(self) -> list[BrokerInfo]:
        return [
            BrokerInfo(int(b["id"]), b["url"], bool(b.get("alive")), bool(b.get("controller")))
            for b in self.call("GET", "/brokers")["brokers"]
        ]

    # --- groups ---
    def list_groups(self) -> list[GroupListing]:
        return [
            GroupListing(
                g["name"], g.get("state", ""), int(g.get("members") or 0), g.get("assignor")
            )
            for g in self.call("GET", "/groups")["groups"]
        ]

    def describe_group(self, group_id: str) -> GroupDescription:
        """Members with their assignments, committed offsets and lag."""
        return GroupDescription.from_json(self.call("GET", group_path(group_id)))

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group and its committed offsets. NON_EMPTY_GROUP while it has live
        members; GROUP_ID_NOT_FOUND if there is no such group."""
        self.call("DELETE", group_path(group_id))

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, GroupOffset]:
        """The group's committed offsets (with lag behind the high watermark)."""
        return _group_offsets(self.call("GET", group_path(group_id) + "/offsets"))

    def reset_group_offsets(
        self,
        group_id: str,
        topic: str,
        *,
        to: str | int | datetime,
        partitions: Sequence[int] | None = None,
        dry_run: bool = False,
    ) -> list[OffsetReset]:
        """Move an empty group's committed offsets of `topic` (all partitions, or these):
        to="earliest", "latest", a datetime (the first record at or after it), or an int
        offset. Refused with NON_EMPTY_GROUP while the group has live members."""
        scope: dict[str, Any] = (
            {"partitions": [{"topic": topic, "partition": p} for p in partitions]}
            if partitions is not None
            else {"topics": [topic]}
        )
        body: dict[str, Any]
        if isinstance(to, datetime):
            body = {"at": _ms(to), **scope}
        elif isinstance(to, str):
            if to not in ("earliest", "latest"):
                raise ValueError(f"to must be earliest, latest, a datetime or an offset: {to!r}")
            body = {"at": to, **scope}
        else:  # an explicit offset names its partitions
            ps = partitions
            if ps is None:
                ps = [p.partition for p in self.describe_topic(topic).partitions]
            body = {"offsets": [{"topic": topic, "partition": p, "offset": int(to)} for p in ps]}
        body["dry_run"] = dry_run
        doc = self.call("POST", group_path(group_id) + "/offsets/reset", body)
        return [
            OffsetReset(o["topic"], int(o["partition"]), int(o["offset"]), o.get("previous"))
            for o in doc.get("offsets", [])
        ]
