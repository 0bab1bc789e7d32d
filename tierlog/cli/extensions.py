"""What the composition root adds to the nodes it starts: consumer groups on brokers and fetch
nodes (groups/), a topic's Delta table view (fetch/lake.py) on both, the Schema Registry on
brokers (registry/), and the cold tier's reader (fetch/) under a broker. Only here do the roles
meet; each package below imports none of the others."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cluster.extension import Extension

if TYPE_CHECKING:
    from coldstore.object_store import ObjectStoreConfig
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

    mount = RegistryMount(broker.config.database_url, broker.notices)
    return Extension(mount.routes, mount.running)


def lake_on_node(
    store: ObjectStoreConfig | None,
) -> Callable[[Broker | FetchNode], Extension]:
    """GET /topics/{topic}/lake on a broker or fetch node (the console's Lake page asks any
    node), over the role's S3 (None: not configured)."""

    def mount(node: Broker | FetchNode) -> Extension:
        from fetch.lake import LakeEndpoint

        endpoint = LakeEndpoint(node.config.database_url, node.cache, store)
        return Extension(endpoint.routes, endpoint.running)

    return mount
