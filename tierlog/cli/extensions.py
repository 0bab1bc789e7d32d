"""What the composition root adds to the nodes it starts: consumer groups on brokers and fetch
nodes (groups/), a topic's Delta table view (fetch/lake.py) on both, the Schema Registry on
brokers (registry/), and the cold tier's reader (fetch/) under a broker. Only here do the roles
meet; each package below imports none of the others."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cluster.extension import Extension

if TYPE_CHECKING:
    from cluster.metadata_cache import MetadataCache
    from cluster.read_contract import ColdReader
    from fetch.node import FetchNode
    from ingest.broker import Broker


def groups_on_broker(broker: Broker) -> Extension:
    """Consumer groups on a broker, over HTTP and its Kafka listener: partitions it leads give
    their high watermark in process."""
    from groups.mount import GroupsMount

    def local_hw(topic: str, partition: int) -> int | None:
        state = broker.leader_state(topic, partition)
        return state.high_watermark if state is not None else None

    mount = GroupsMount(
        broker.config.database_url, broker.cache, lambda: broker.cluster_secret, local_hw
    )
    return Extension(mount.routes, mount.running, kafka_groups=mount.kafka)


def groups_on_fetch_node(node: FetchNode) -> Extension:
    """Consumer groups served by a fetch node too."""
    from groups.mount import GroupsMount

    mount = GroupsMount(node.config.database_url, node.cache, lambda: node.cluster_secret)
    return Extension(mount.routes, mount.running)


def registry_on_broker(broker: Broker) -> Extension:
    """The Schema Registry (Confluent's REST API) under /schema-registry on every broker."""
    from registry.mount import RegistryMount

    mount = RegistryMount(broker.config.database_url)
    return Extension(mount.routes, mount.running)


def lake_on_broker(broker: Broker) -> Extension:
    """GET /topics/{topic}/lake on a broker (the console's Lake page asks any broker)."""
    return _lake(broker.config.database_url, broker.cache)


def lake_on_fetch_node(node: FetchNode) -> Extension:
    return _lake(node.config.database_url, node.cache)


def _lake(database_url: str, cache: MetadataCache) -> Extension:
    from coldstore.object_store import ObjectStoreConfig
    from fetch.lake import LakeEndpoint

    endpoint = LakeEndpoint(
        database_url, cache, ObjectStoreConfig.from_env() if s3_configured() else None
    )
    return Extension(endpoint.routes, endpoint.running)


def s3_configured() -> bool:
    return bool(os.environ.get("TIERLOG_S3_ENDPOINT") or os.environ.get("TIERLOG_S3_BUCKET"))


def cold_tier(database_url: str) -> ColdReader | None:
    """fetch's cold reader over the async object store, when S3 is configured: how a broker
    serves offsets below its local log start, and how a fetch node reads S3."""
    if not s3_configured():
        return None
    from coldstore.object_store import AsyncObjectStore, ObjectStoreConfig
    from fetch.cold.cold_tier import ColdTier, ColdTierConfig

    store = AsyncObjectStore(ObjectStoreConfig.from_env())
    return ColdTier(database_url, store, ColdTierConfig.from_env())
