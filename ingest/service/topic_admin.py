"""Topic administration for both front-ends (HTTP /topics, Kafka CreateTopics, DeleteTopics,
CreatePartitions, IncrementalAlterConfigs): authorization, validation, the repository call,
and then the metadata refresh and replica reconcile, each written once here.

Kafka's admin requests name many topics; `batch()` gives them an admin whose writes refresh
and reconcile once, when the request is done, rather than once per topic."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from logformat.errors import ErrorCode, TierlogError
from metadata.acl import CLUSTER_NAME
from metadata.configs import check_min_insync, merge_configs, validate_configs, validate_topic_name
from metadata.topics import MAX_PARTITIONS

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView
    from ingest.broker import Broker
    from metadata.types import TopicInfo

NO_TOPIC_ID = str(uuid.UUID(int=0))  # what a validate-only create answers


class NewTopic(NamedTuple):
    name: str
    partitions: int | None  # None: the broker's default (--default-partitions)
    replication_factor: int | None  # None: --default-replication-factor
    configs: Mapping[str, Any]
    manual_assignment: bool = False  # Kafka's replica assignments: refused


class Created(NamedTuple):
    partitions: int
    replication_factor: int
    topic_id: str  # NO_TOPIC_ID when only validated


def _no_assignment(manual: bool) -> None:
    if manual:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, "manual replica assignments are not supported"
        )


class TopicAdmin:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._deferred = False  # in a batch(): refresh once at its end
        self._changed = False

    @contextlib.asynccontextmanager
    async def batch(self) -> AsyncIterator[TopicAdmin]:
        admin = copy.copy(self)
        admin._deferred, admin._changed = True, False
        try:
            yield admin
        finally:
            if admin._changed:
                await self._after_change()

    async def _after_change(self) -> None:
        """Reload metadata and reconcile the hosted replicas at once: the caller's next
        request (and this broker's replicas) see the change without waiting for NOTIFY."""
        await asyncio.to_thread(self._broker.cache.refresh, True)
        self._broker.reconcile()

    async def _changed_now(self) -> None:
        if self._deferred:
            self._changed = True
        else:
            await self._after_change()

    async def topic(self, principal: str, name: str, operation: str) -> TopicView:
        """The topic, once `principal` may `operation` it (checked first, so a denied
        caller learns nothing about whether it exists)."""
        self._broker.authorizer.require(principal, "topic", name, operation)
        return await self._broker.cache.require_topic(name)

    async def create(self, principal: str, new: NewTopic, validate_only: bool = False) -> Created:
        auth = self._broker.authorizer  # Kafka's CreateTopics: CREATE on the cluster or topic
        if not auth.allowed(principal, "cluster", CLUSTER_NAME, "create"):
            auth.require(principal, "topic", new.name, "create")
        cfg = self._broker.config
        partitions = cfg.default_partitions if new.partitions is None else new.partitions
        rf = (
            cfg.default_replication_factor
            if new.replication_factor is None
            else new.replication_factor
        )
        _no_assignment(new.manual_assignment)
        if validate_only:  # the checks that need no write: name, configs, existence
            validate_topic_name(new.name)
            check_min_insync(validate_configs(dict(new.configs)), rf)
            cache = self._broker.cache
            if await asyncio.to_thread(cache.topic_or_refresh, new.name) is not None:
                raise TierlogError(
                    ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {new.name!r} already exists"
                )
            return Created(partitions, rf, NO_TOPIC_ID)
        create = self._broker.topics.create
        info = await asyncio.to_thread(create, new.name, partitions, rf, dict(new.configs))
        await self._changed_now()
        return Created(partitions, rf, info.id)

    async def delete(self, principal: str, name: str) -> TopicInfo:
        await self.topic(principal, name, "delete")
        info = await asyncio.to_thread(self._broker.topics.delete, name)
        await self._changed_now()
        return info

    async def grow(
        self,
        principal: str,
        name: str,
        total: int,
        manual_assignment: bool = False,
        validate_only: bool = False,
    ) -> None:
        """The topic's new partition count (Kafka's CreatePartitions: ALTER, grow only)."""
        view = await self.topic(principal, name, "alter")
        _no_assignment(manual_assignment)
        if not validate_only:
            await asyncio.to_thread(self._broker.topics.add_partitions, name, total)
            await self._changed_now()
        elif not view.info.partition_count < total <= MAX_PARTITIONS:
            raise TierlogError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {view.info.partition_count} partitions; the new total "
                f"must be larger and at most {MAX_PARTITIONS}, got {total}",
            )

    async def alter_configs(
        self,
        principal: str,
        name: str,
        to_set: Mapping[str, Any],
        to_delete: list[str],
        validate_only: bool = False,
    ) -> None:
        """Set and restore (to_delete) topic configs (Kafka: ALTER_CONFIGS on the topic)."""
        info = (await self.topic(principal, name, "alter")).info
        if validate_only:  # the same checks as the write, without it
            merged = merge_configs(info.configs, dict(to_set), to_delete)
            check_min_insync(merged, info.replication_factor)
            return
        alter = self._broker.topics.alter_configs
        await asyncio.to_thread(alter, name, dict(to_set), to_delete)
        await self._changed_now()
