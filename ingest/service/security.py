"""Security for both front-ends: the authorizer (ACL decisions, and the one map from a
refusal to its error code, cluster/authorizer.py) and the repositories of API keys, ACLs,
SCRAM credentials and client quotas, built once on the broker's engine (HTTP's security
routes administer them; Kafka's SASL/SCRAM reads the credentials)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from metadata.quotas import QuotaRepo
from metadata.scram import ScramRepo
from metadata.security import SecurityRepo

if TYPE_CHECKING:
    from cluster.authorizer import Authorizer
    from ingest.broker import Broker


class Security:
    def __init__(self, broker: Broker) -> None:
        self.authorizer: Authorizer = broker.authorizer
        self.engine = broker.engine  # the security tables' database
        self.keys = SecurityRepo(broker.engine)  # API keys and ACLs
        self.scram = ScramRepo(broker.engine)
        self.quotas = QuotaRepo(broker.engine)
