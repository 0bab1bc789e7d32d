"""The services the protocol front-ends call, built once per broker by the composition root
(ingest/server.py) and handed to the HTTP app and the Kafka listeners instead of the Broker
(docs/architecture.md). Each rule of the data path lives in one of them, for both
protocols."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ingest.service.cluster_identity import ClusterIdentity
from ingest.service.erasure import Erasures
from ingest.service.leader_election import LeaderElections
from ingest.service.log_admin import LogAdmin
from ingest.service.node_status import NodeStatus
from ingest.service.produce import Produce, ProducerIds
from ingest.service.reads import Reads
from ingest.service.record_deletion import RecordDeletion
from ingest.service.replica_serving import ReplicaServing
from ingest.service.scram_admin import ScramAdmin
from ingest.service.security import Security
from ingest.service.topic_admin import TopicAdmin
from ingest.service.topic_describe import Describer
from ingest.service.txn_coordinator import Transactions
from ingest.service.txn_log import TxnLog, txn_log
from metadata.scram import ScramRepo

if TYPE_CHECKING:
    from cluster.http.inflight import SlotCounter
    from cluster.http.quota_manager import QuotaManager
    from cluster.metadata_cache import MetadataCache
    from ingest.broker import Broker
    from ingest.broker_config import BrokerConfig
    from ingest.replication.forwarding import Forwarder


@dataclass(frozen=True)
class Services:
    admin: TopicAdmin  # create, delete, grow, alter configs
    describe: Describer  # a topic's partitions, offsets and tiering lag
    produce: Produce
    reads: Reads  # fetch and list-offsets
    producer_ids: ProducerIds
    security: Security  # ACL decisions; keys, ACLs, SCRAM credentials, quotas
    identity: ClusterIdentity  # the cluster id and the controller, as Kafka names them
    config: BrokerConfig
    metadata: MetadataCache  # topics, partitions, brokers and leaders, as last loaded
    quotas: QuotaManager  # client quotas, one for both listeners
    long_polls: SlotCounter  # the long-poll cap, one for both listeners
    forwarder: Forwarder  # one hop to a partition's leader (HTTP only: Kafka never forwards)
    cluster_secret: Callable[[], str]  # the credential between nodes
    replicas: ReplicaServing  # the cluster-internal routes: replica fetch, segments
    status: NodeStatus  # readiness, metrics registry, brokers (the ops routes)
    logs: LogAdmin  # DescribeProducers, DescribeLogDirs
    erasures: Erasures  # erasure requests: accepted, read, listed (issue 31)
    txns: TxnLog  # transactional partitions: the produce check, markers, what reads see
    transactions: Transactions  # the transaction coordinator (Kafka's transaction APIs)
    deletion: RecordDeletion  # DeleteRecords: a partition's log start moved forward
    scram_admin: ScramAdmin  # AlterUserScramCredentials
    elections: LeaderElections  # ElectLeaders: preferred replicas back to leading

    @classmethod
    def of(cls, broker: Broker) -> Services:
        return cls(
            TopicAdmin(broker),
            Describer(broker),
            Produce(broker),
            Reads(broker),
            ProducerIds(broker),
            Security(broker),
            ClusterIdentity(broker),
            broker.config,
            broker.cache,
            broker.quotas,
            broker.long_polls,
            broker.forwarder,
            lambda: broker.cluster_secret,
            ReplicaServing(broker),
            NodeStatus(broker),
            LogAdmin(broker),
            Erasures(broker),
            txn_log(broker),
            Transactions(broker),
            RecordDeletion(broker),
            ScramAdmin(ScramRepo(broker.engine)),
            LeaderElections(broker),
        )
