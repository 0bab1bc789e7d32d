"""Auth across hops: a client is authorized where it lands; forwarded produces, proxied
reads and a fetch node's calls to brokers carry the cluster credential."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import FAST, wait_for
from tests.integration.fetch_nodes import FetchNodeProcess
from tests.integration.secured import SECURE_ARGS, Secured, secure_broker


@pytest.fixture
def two(fresh_db: str, tmp_path: Path) -> Iterator[tuple[list[BrokerProcess], Secured]]:
    sec = Secured(fresh_db)
    brokers = [secure_broker(fresh_db, tmp_path / f"d{i}", i, FAST) for i in (1, 2)]
    try:
        for b in brokers:
            b.start(wait=False)
        for b in brokers:
            b.wait_ready()
        admin = sec.client(brokers[0].url, "admin")
        wait_for("both brokers alive", lambda: len(admin.get("/brokers").json()["brokers"]) == 2)
        r = admin.post("/topics", json={"name": "t", "partitions": 2, "replication_factor": 1})
        assert r.status_code == 201, r.text
        yield brokers, sec
    finally:
        for b in brokers:
            b.stop()
        sec.close()


def test_forwarded_produce_and_proxied_reads(
    two: tuple[list[BrokerProcess], Secured], tmp_path: Path
) -> None:
    brokers, sec = two
    sec.allow("app", "topic", "t", "write", "read")
    admin = sec.client(brokers[0].url, "admin")
    parts = admin.get("/topics/t").json()["partitions"]
    wait_for(
        "leaders", lambda: all(p["leader"] for p in admin.get("/topics/t").json()["partitions"])
    )
    parts = admin.get("/topics/t").json()["partitions"]
    # A partition led by broker 2, written and read through broker 1.
    p = next(x["partition"] for x in parts if x["leader"] == 2)
    app = sec.client(brokers[0].url, "app")
    stranger = sec.client(brokers[0].url, "stranger")
    rec = {"records": [{"value": "v", "partition": p}]}
    r = stranger.post("/topics/t/records", json=rec)
    assert r.status_code == 403  # refused at the first hop: nothing reaches the leader
    r = app.post("/topics/t/records", json=rec)
    assert r.status_code == 200, r.text
    assert r.json()["offsets"] == [{"partition": p, "offset": 0}]
    r = app.get(f"/topics/t/partitions/{p}/records", params={"offset": 0})
    assert r.status_code == 200, r.text
    assert [x["value"] for x in r.json()["records"]] == ["v"]
    assert app.get(f"/topics/t/partitions/{p}/offsets").json()["offset"] == 1
    assert stranger.get(f"/topics/t/partitions/{p}/records").status_code == 403
    # A search of every partition: broker 2's is searched there (cluster credential).
    lines = app.get("/topics/t/search", params={"value": "v"}).text.splitlines()
    assert any(f'"partition":{p},"tier":"hot","offset":0' in x for x in lines), lines
    assert '"errors":0' in lines[-1] and '"hits":1' in lines[-1], lines
    assert stranger.get("/topics/t/search", params={"value": "v"}).status_code == 403

    node = FetchNodeProcess(
        brokers[0].database_url, tmp_path / "fetch.log", {}, SECURE_ARGS, secure=True
    ).start()
    try:
        via = sec.client(node.url, "app")
        r = via.get(f"/topics/t/partitions/{p}/records", params={"offset": 0})
        assert r.status_code == 200, r.text
        assert [x["value"] for x in r.json()["records"]] == ["v"]
        assert via.get(f"/topics/t/partitions/{p}/offsets").json()["offset"] == 1
        assert [t["name"] for t in via.get("/topics").json()["topics"]] == ["t"]
        assert sec.client(node.url, "stranger").get("/topics").json() == {"topics": []}
        assert sec.client(node.url, None).get("/topics/t").status_code == 401
        # /metrics names every topic: a key with DESCRIBE on the cluster (issue 24 K7).
        assert sec.client(node.url, None).get("/metrics").status_code == 401
        assert sec.client(node.url, "stranger").get("/metrics").status_code == 403
        assert "tierlog_" in sec.client(node.url, "admin").get("/metrics").text
        # Its OpenAPI document (an open path) lists what it serves, and only that.
        doc = sec.client(node.url, None).get("/openapi.json").json()
        assert doc["info"]["title"] == "tierlog fetch node"
        assert set(doc["paths"]["/topics/{topic}/partitions/{partition}/records"]) >= {"get"}
        assert "/groups/{group}/members" in doc["paths"]  # groups are mounted on the node
        assert "/producers" not in doc["paths"] and "/topics/{topic}/records" not in doc["paths"]
        assert set(doc["paths"]["/topics"]) == {"get"}  # no topic creation here
        assert (
            sec.client(node.url, "stranger").get(f"/topics/t/partitions/{p}/records").status_code
            == 403
        )
    finally:
        node.stop()
