"""Kafka's security admin (issue 30): DescribeAcls, CreateAcls and DeleteAcls from
confluent-kafka's AdminClient and kafka-python's KafkaAdminClient read and write the one ACL
store the HTTP API and `tierlog acls` use, authorized as Kafka does (ALTER on the cluster to
change, DESCRIBE to list); DescribeUserScramCredentials shows the SCRAM store's users."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from metadata.acl import AclBinding as StoredBinding
from metadata.api_keys import parse_key
from metadata.scram import ScramRepo
from tests.integration.ports import free_port
from tests.integration.secured import Secured, secure_broker, settle, started

with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import errors as kafka_errors
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as PyResourceType

Env = tuple[Secured, str]


@pytest.fixture(scope="module")
def env(db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    url = db_factory()
    sec = Secured(url)
    port = free_port()
    data = Path(tmp_path_factory.mktemp("kafka-acls")) / "data"
    broker = secure_broker(url, data, extra=["--kafka-listen", f"127.0.0.1:{port}"])
    for _ in started(broker):
        yield sec, f"127.0.0.1:{port}"
    sec.close()


def _login(sec: Secured, user: str) -> tuple[str, str]:
    key = sec.key(user)
    parsed = parse_key(key)
    assert parsed is not None
    return parsed.key_id, key


def _admin(sec: Secured, bootstrap: str, user: str) -> AdminClient:
    name, password = _login(sec, user)
    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": name,
            "sasl.password": password,
        }
    )


def _py_admin(sec: Secured, bootstrap: str, user: str) -> Any:
    name, password = _login(sec, user)
    return KafkaAdminClient(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=name,
        sasl_plain_password=password,
    )


def _stored(sec: Secured, topic: str) -> set[tuple[str, str, str, str]]:
    return {
        (b.principal, b.pattern_type, b.operation, b.permission)
        for b in sec.repo.acls()
        if b.resource_type == "topic" and b.resource_name == topic
    }


def test_confluent_acls_are_the_store_s(env: Env) -> None:
    sec, bootstrap = env
    admin = _admin(sec, bootstrap, "admin")
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    read = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:carol",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    admin.create_acls([read])[read].result(timeout=30)
    assert _stored(sec, topic) == {("User:carol", "literal", "read", "allow")}
    # One added as `tierlog acls add` and the HTTP API do is described over Kafka.
    sec.repo.add_acl(StoredBinding("User:dave", "topic", "prefixed", topic, "write", "deny"))
    everything = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    found = admin.describe_acls(everything).result(timeout=30)
    assert {(b.principal, b.operation, b.permission_type, b.host) for b in found} == {
        ("User:carol", AclOperation.READ, AclPermissionType.ALLOW, "*"),
        ("User:dave", AclOperation.WRITE, AclPermissionType.DENY, "*"),
    }
    # A binding tierlog cannot hold is refused, naming why.
    on_host = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:carol",
        "10.0.0.1",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([on_host])[on_host].result(timeout=30)
    assert "every host" in str(refused.value)
    deleted = admin.delete_acls([everything])[everything].result(timeout=30)
    assert len(deleted) == 2 and _stored(sec, topic) == set()


def test_kafka_python_acls_and_who_may_change_them(env: Env) -> None:
    sec, bootstrap = env
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    admin = _py_admin(sec, bootstrap, "admin")
    pattern = ResourcePattern(PyResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL)
    acl = ACL("User:erin", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW, pattern)
    created = admin.create_acls([acl])
    assert created["failed"] == [] and len(created["succeeded"]) == 1
    assert _stored(sec, topic) == {("User:erin", "literal", "describe", "allow")}
    any_on_topic = ACLFilter(
        None,
        None,
        ACLOperation.ANY,
        ACLPermissionType.ANY,
        ResourcePatternFilter(PyResourceType.TOPIC, topic, ACLResourcePatternType.ANY),
    )
    found, error = admin.describe_acls(any_on_topic)
    assert error.errno == 0 and [a.principal for a in found] == ["User:erin"]
    admin.close()
    # Without ALTER on the cluster nothing changes; without DESCRIBE nothing is listed.
    settle()
    outsider = _py_admin(sec, bootstrap, "frank")
    refused = outsider.create_acls([acl])
    assert refused["succeeded"] == [] and len(refused["failed"]) == 1
    [(_, matched, delete_error)] = outsider.delete_acls([any_on_topic])
    assert matched == [] and delete_error.errno == 31  # CLUSTER_AUTHORIZATION_FAILED
    assert _stored(sec, topic) == {("User:erin", "literal", "describe", "allow")}
    outsider.close()


def test_scram_credentials_are_described(env: Env) -> None:
    sec, bootstrap = env
    key_id, key = _login(sec, "grace")
    ScramRepo(sec.engine).set_for_key(key)  # what `tierlog users scram` stores
    admin = _admin(sec, bootstrap, "admin")
    found = admin.describe_user_scram_credentials([key_id])[key_id].result(timeout=30)
    assert sorted((str(i.mechanism), i.iterations) for i in found.scram_credential_infos) == [
        ("ScramMechanism.SCRAM_SHA_256", 4096),
        ("ScramMechanism.SCRAM_SHA_512", 4096),
    ]
    with pytest.raises(KafkaException) as unknown:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(timeout=30)
    assert unknown.value.args[0].name() == "RESOURCE_NOT_FOUND"
    # Without DESCRIBE on the cluster: refused. Asked with kafka-python: librdkafka 2.16's
    # describe-all crashed the test process (SIGSEGV) on this answer (a top-level error and
    # no per-user results, the shape of Kafka's own error response).
    outsider = _py_admin(sec, bootstrap, "heidi")
    with pytest.raises(kafka_errors.ClusterAuthorizationFailedError):
        outsider.describe_user_scram_credentials()
    outsider.close()
