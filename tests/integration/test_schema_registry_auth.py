"""The registry with auth on: the broker's API keys, sent as Confluent clients send
`basic.auth.user.info` (HTTP Basic, key id : key) or as Bearer, and ACLs on the `subject`
resource (literal and prefixed; read for GETs, write to register, alter for config and
deletes). One secured broker for the file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.integration.brokers import BrokerProcess
from tests.integration.secured import Secured, secure_broker, started

SCHEMA = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]})
V1 = {"content-type": "application/vnd.schemaregistry.v1+json"}


@pytest.fixture(scope="module")
def env(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, Secured]]:
    url = db_factory()
    sec = Secured(url)
    broker = secure_broker(url, Path(tmp_path_factory.mktemp("registry-auth")) / "data")
    try:
        for b in started(broker):
            sec.allow("alice", "subject", "alice-", "read", "write", prefixed=True)
            sec.deny("alice", "subject", "alice-locked", "write")
            sec.allow("bob", "subject", "alice-orders", "read")
            yield b, sec
    finally:
        sec.close()


def confluent(b: BrokerProcess, sec: Secured, user: str) -> SchemaRegistryClient:
    key = sec.key(user)
    key_id = key.split("_")[1]
    return SchemaRegistryClient(
        {"url": f"{b.url}/schema-registry", "basic.auth.user.info": f"{key_id}:{key}"}
    )


def test_a_key_allowed_on_a_subject_registers_and_reads(
    env: tuple[BrokerProcess, Secured],
) -> None:
    b, sec = env
    alice = confluent(b, sec, "alice")
    sid = alice.register_schema("alice-orders", Schema(SCHEMA, "AVRO"))
    assert alice.get_schema(sid).schema_str == SCHEMA.replace(" ", "")
    assert alice.get_versions("alice-orders") == [1]
    # bob may read that subject (Bearer works as well as Basic), not write it
    bob = sec.client(f"{b.url}/schema-registry", "bob", headers=V1)
    assert bob.get("/subjects/alice-orders/versions").json() == [1]
    assert bob.get(f"/schemas/ids/{sid}").status_code == 200
    assert bob.get("/subjects").json() == ["alice-orders"]


def test_a_key_denied_on_a_subject_is_refused_and_changes_nothing(
    env: tuple[BrokerProcess, Secured],
) -> None:
    b, sec = env
    bob = confluent(b, sec, "bob")
    with pytest.raises(SchemaRegistryError) as caught:
        bob.register_schema("alice-orders", Schema('"string"', "AVRO"))
    assert caught.value.http_status_code == 403 and caught.value.error_code == 40301
    alice = confluent(b, sec, "alice")
    with pytest.raises(SchemaRegistryError) as denied:  # DENY wins over the prefixed ALLOW
        alice.register_schema("alice-locked", Schema(SCHEMA, "AVRO"))
    assert denied.value.http_status_code == 403
    with pytest.raises(SchemaRegistryError) as no_alter:  # read+write, no alter
        alice.set_compatibility("alice-orders", "NONE")
    assert no_alter.value.http_status_code == 403
    with pytest.raises(SchemaRegistryError) as no_delete:
        alice.delete_subject("alice-orders")
    assert no_delete.value.http_status_code == 403
    carol = sec.client(f"{b.url}/schema-registry", "carol", headers=V1)  # no ACL at all
    assert carol.get("/subjects/alice-orders/versions").status_code == 403
    assert carol.get("/subjects").json() == []
    assert carol.get("/config").status_code == 403
    assert confluent(b, sec, "alice").get_versions("alice-orders") == [1]
    assert alice.get_subjects() == ["alice-orders"]


def test_missing_or_wrong_credentials_get_401(env: tuple[BrokerProcess, Secured]) -> None:
    b, sec = env
    url = f"{b.url}/schema-registry/subjects"
    assert httpx.get(url).status_code == 401
    key_id = sec.key("alice").split("_")[1]
    wrong = httpx.get(url, auth=(key_id, "tlk_" + key_id + "_" + "x" * 43))
    assert wrong.status_code == 401
    other = httpx.get(url, auth=("000000000000", sec.key("alice")))  # id and key disagree
    assert other.status_code == 401
    assert httpx.get(url, auth=(key_id, sec.key("alice"))).status_code == 200
