"""Fencing and the leader's own ISR upkeep, made deterministic by cutting real connections
(tests/integration/tcp_proxy.py) instead of pausing processes (issue 12, item 7).

Each broker reaches Postgres through a proxy of its own, and advertises its HTTP port through
another (followers fetch from their leader, and brokers forward to it, at the advertised URL);
the test talks to every broker directly. Cutting a leader's Postgres proxy and its advertised
proxy isolates it from the cluster while the test can still send it requests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from tests.integration.cluster import Cluster, wait_for
from tests.integration.tcp_proxy import TcpProxy


class Partitioned:
    """A three-broker cluster whose brokers' links can be cut one by one."""

    def __init__(self, database_url: str, root: Any) -> None:
        self.cluster = Cluster(database_url, root, 3)
        pg_port = int(make_url(database_url).port or 5432)
        self.to_postgres: dict[int, TcpProxy] = {}
        self.to_broker: dict[int, TcpProxy] = {}
        for i, b in self.cluster.brokers.items():
            self.to_postgres[i] = pg = TcpProxy(pg_port)
            self.to_broker[i] = inbound = TcpProxy(b.port)
            b.database_url = (
                make_url(database_url)
                .set(host="127.0.0.1", port=pg.port)
                .render_as_string(hide_password=False)
            )
            b.extra_args += ["--advertised-url", f"http://127.0.0.1:{inbound.port}"]

    def close(self) -> None:
        self.cluster.stop()
        for p in [*self.to_postgres.values(), *self.to_broker.values()]:
            p.close()


@pytest.fixture(scope="module")
def net(db_factory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Partitioned]:  # type: ignore[no-untyped-def]
    n = Partitioned(db_factory(), tmp_path_factory.mktemp("fencing"))
    n.cluster.start()
    yield n
    n.close()


def _partition(c: Cluster, topic: str, via: int) -> dict[str, Any]:
    return dict(c.describe(topic, via=c.brokers[via])["partitions"][0])


def test_leader_drops_followers_that_stop_fetching_then_takes_them_back(
    net: Partitioned,
) -> None:
    """replica.lag.time.max.ms: followers alive (their leases current) but unable to fetch
    leave the ISR by the *leader's* decision, and rejoin once they catch up."""
    c = net.cluster
    c.create_topic("lag", min_insync_replicas=1)
    leader = c.leader("lag")
    net.to_broker[leader.broker_id].cut()  # followers' fetches fail; heartbeats go on
    try:
        wait_for(
            "the leader alone in the ISR",
            lambda: c.partition("lag")["isr"] == [leader.broker_id],
            timeout=30,
        )
        assert all(b["alive"] for b in leader.http.get("/brokers").json()["brokers"])
        assert "ISR changed" in leader.log_tail(200)
        c.produce("lag", [{"value": f"v{i}"} for i in range(5)], via=leader.broker_id)
    finally:
        net.to_broker[leader.broker_id].restore()
    wait_for("the ISR whole again", lambda: len(c.partition("lag")["isr"]) == 3, timeout=30)
    assert c.partition("lag")["leader"] == leader.broker_id  # no election: the leader's call
    for b in c.brokers.values():
        wait_for(
            f"broker {b.broker_id} caught up",
            lambda b=b: c.segment_bytes(b, "lag") == c.segment_bytes(leader, "lag"),
        )


def test_isolated_leader_cannot_acknowledge_and_its_tail_is_truncated(net: Partitioned) -> None:
    """The old leader is cut off from Postgres and from its followers, never paused: it keeps
    answering. Within its lease it takes an acks=1 write no one else has; once replaced, it
    refuses writes outright (it cannot learn of the new leader, so it cannot forward); when
    the links return it follows the new leader and its divergent tail is gone."""
    c = net.cluster
    c.create_topic("fence", min_insync_replicas=2)
    c.produce("fence", [{"value": "a"}, {"value": "b"}])
    old = c.leader("fence")
    for b in c.brokers.values():
        wait_for(
            "replicas caught up",
            lambda b=b: c.segment_bytes(b, "fence") == c.segment_bytes(old, "fence"),
        )
    other = next(i for i in c.brokers if i != old.broker_id)
    net.to_postgres[old.broker_id].cut()
    net.to_broker[old.broker_id].cut()
    try:
        r = old.http.post(
            "/topics/fence/records",
            params={"acks": "1"},
            json={"records": [{"value": "only-on-the-old-leader", "partition": 0}]},
        )
        assert r.status_code == 200, r.text  # its lease still runs: acks=1 may be lost later
        new = wait_for(
            "a new leader",
            lambda: (
                (ld := _partition(c, "fence", other)["leader"]) not in (None, old.broker_id) and ld
            ),
            timeout=30,
        )
        for acks in ("all", "1"):
            r = old.http.post(
                "/topics/fence/records",
                params={"acks": acks},
                json={"records": [{"value": f"zombie-acks-{acks}", "partition": 0}]},
            )
            assert r.status_code != 200, r.text
            assert r.json()["error_code"] == "NOT_LEADER_OR_FOLLOWER", r.text
        c.produce("fence", [{"value": "c"}], via=new)
    finally:
        net.to_postgres[old.broker_id].restore()
        net.to_broker[old.broker_id].restore()
    wait_for(
        "old leader truncated and following",
        lambda: c.segment_bytes(old, "fence") == c.segment_bytes(c.brokers[new], "fence"),
        timeout=40,
    )
    values = [r["value"] for r in c.brokers[new].fetch_all("fence")]
    assert values == ["a", "b", "c"]
    wait_for("lapse logged", lambda: "broker lease lapsed" in old.log_tail(400), timeout=20)
