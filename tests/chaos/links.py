"""The chaos world's network: every link a partition can cut runs through a TCP proxy of its
own (tests/integration/tcp_proxy.py), set up before the brokers start.

Per broker:
- `postgres`: its connection to Postgres (its database URL points at the proxy). Cut, the
  broker alone loses Postgres (its lease, metadata, the controller) while it still talks to
  clients and the other brokers: "leader <-> Postgres only".
- `peers`: the address it advertises to the cluster (`--advertised-url`), which the other
  brokers (follower fetches, forwarding) and the fetch node use. Cut, nobody else reaches
  it, while it still reaches them: one-way, "followers -> leader" for its partitions.
- `clients`: the address the workload's HTTP clients use for it. Cut, clients cannot reach
  it and go to another broker, which forwards: "client <-> leader".
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.integration.cluster import Cluster
from tests.integration.tcp_proxy import TcpProxy

KINDS = ("postgres", "peers", "clients")


@dataclass
class BrokerLinks:
    postgres: TcpProxy
    peers: TcpProxy
    clients: TcpProxy

    def get(self, kind: str) -> TcpProxy:
        proxy = getattr(self, kind)
        assert isinstance(proxy, TcpProxy)
        return proxy


class Links:
    def __init__(self, cluster: Cluster, pg_port: int) -> None:
        """Wire `cluster` (not started yet) through proxies: Postgres at `pg_port`."""
        self.cluster = cluster
        self.brokers: dict[int, BrokerLinks] = {}
        for i, b in cluster.brokers.items():
            links = BrokerLinks(TcpProxy(pg_port), TcpProxy(b.port), TcpProxy(b.port))
            self.brokers[i] = links
            b.database_url = b.database_url.replace(f":{pg_port}/", f":{links.postgres.port}/")
            b.extra_args += ["--advertised-url", f"http://127.0.0.1:{links.peers.port}"]

    def client_url(self, broker_id: int) -> str:
        return f"http://127.0.0.1:{self.brokers[broker_id].clients.port}"

    def client_urls(self) -> list[str]:
        """The running brokers, as the workload's clients reach them."""
        return [self.client_url(b.broker_id) for b in self.cluster.alive()]

    def cut(self, broker_id: int, kind: str) -> None:
        self.brokers[broker_id].get(kind).cut()

    def restore(self, broker_id: int, kind: str) -> None:
        self.brokers[broker_id].get(kind).restore()

    def restore_all(self) -> None:
        for links in self.brokers.values():
            for kind in KINDS:
                links.get(kind).restore()

    def close(self) -> None:
        for links in self.brokers.values():
            for kind in KINDS:
                links.get(kind).close()
