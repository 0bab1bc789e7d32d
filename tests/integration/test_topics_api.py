"""Topic administration over HTTP."""

from __future__ import annotations

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for


@pytest.fixture(scope="module")
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module: each test has its own topics."""
    return module_broker


def test_topic_lifecycle(broker: BrokerProcess) -> None:
    http = broker.http
    created = broker.create_topic("life", partitions=2, retention_ms=60000)
    assert created["name"] == "life" and len(created["partitions"]) == 2
    p0 = created["partitions"][0]
    assert p0["leader"] == 1 and p0["replicas"] == [1] and p0["isr"] == [1]
    assert (
        p0["log_start_offset"] == 0
        and p0["high_watermark"] == 0
        and p0["hot"] == {"start": 0, "end": 0}
    )
    assert created["configs"]["retention.ms"] == "60000"
    assert {"name": "life", "partitions": 2, "replication_factor": 1} in http.get("/topics").json()[
        "topics"
    ]

    r = http.patch(
        "/topics/life/configs", json={"configs": {"retention.ms": 120000, "segment.bytes": None}}
    )
    assert r.status_code == 200 and r.json()["configs"]["retention.ms"] == "120000"

    broker.produce("life", [{"value": "x", "partition": 1}])
    r = http.post("/topics/life/partitions", json={"partitions": 4})
    assert r.status_code == 200 and len(r.json()["partitions"]) == 4
    assert broker.produce("life", [{"value": "y", "partition": 3}]) == [
        {"partition": 3, "offset": 0}
    ]

    assert http.delete("/topics/life").status_code == 200
    assert http.get("/topics/life").status_code == 404
    assert not list(broker.data_dir.glob("life-*"))
    # A re-created topic of the same name starts empty.
    broker.create_topic("life", partitions=2)
    assert broker.fetch("life", 1)["high_watermark"] == 0


def test_operations_endpoints(broker: BrokerProcess) -> None:
    http = broker.http
    assert http.get("/healthz").json() == {"status": "ok"}
    assert http.get("/readyz").status_code == 200
    broker.create_topic("m")
    broker.produce("m", [{"value": "x"}])
    metrics = http.get("/metrics").text
    assert 'tierlog_produce_records_total{topic="m"} 1.0' in metrics
    assert "tierlog_http_request_seconds_bucket" in metrics
    # The controller lease is taken on the first controller tick, which may follow readiness.
    brokers = wait_for(
        "the only broker holds the controller lease",
        lambda: (b := http.get("/brokers").json()["brokers"])[0]["controller"] and b,
    )
    assert brokers == [{"id": 1, "url": broker.url, "alive": True, "controller": True}]
    spec = http.get("/openapi.json").json()
    assert "/topics/{topic}/records" in spec["paths"]
