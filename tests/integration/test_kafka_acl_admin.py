"""Kafka's security admin (issue 30): DescribeAcls, CreateAcls and DeleteAcls from
confluent-kafka's AdminClient and kafka-python's KafkaAdminClient read and write the one ACL
store the HTTP API and `tierlog acls` use, authorized as Kafka does (ALTER on the cluster to
change, DESCRIBE to list); DescribeUserScramCredentials shows the SCRAM store's users and
AlterUserScramCredentials changes them (a client then logs in with the password set)."""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
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
    from kafka.admin import ScramMechanism as PyScramMechanism
    from kafka.admin import UserScramCredentialDeletion as PyDeletion
    from kafka.admin import UserScramCredentialUpsertion as PyUpsertion

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


def _scram_login_works(bootstrap: str, user: str, password: str, mechanism: str) -> bool:
    """Whether a client logs in with this SCRAM credential (and is then answered) or is
    refused (librdkafka's _AUTHENTICATION error). Neither within the deadline fails the test:
    a client that merely timed out proves nothing about the credential."""
    refused: list[KafkaError] = []

    def on_error(err: KafkaError) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            refused.append(err)

    client = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "error_cb": on_error,
        }
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            client.list_topics(timeout=1)
            return True
        except KafkaException:
            client.poll(0.1)  # serves error_cb
            if refused:
                return False
    raise AssertionError(f"no answer to a SCRAM login of {user} within 30 s")


def test_scram_credentials_are_altered_and_log_in(env: Env) -> None:
    sec, bootstrap = env
    key_id, _ = _login(sec, "ivan")
    admin = _admin(sec, bootstrap, "admin")
    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upsert = UserScramCredentialUpsertion(key_id, sha512, b"chosen-by-admin")
    admin.alter_user_scram_credentials([upsert])[key_id].result(timeout=30)
    found = admin.describe_user_scram_credentials([key_id])[key_id].result(timeout=30)
    assert [(str(i.mechanism), i.iterations) for i in found.scram_credential_infos] == [
        ("ScramMechanism.SCRAM_SHA_512", 8192)
    ]
    assert _scram_login_works(bootstrap, key_id, "chosen-by-admin", "SCRAM-SHA-512")
    assert not _scram_login_works(bootstrap, key_id, "a-wrong-one", "SCRAM-SHA-512")

    # kafka-python: bad alterations get Kafka's errors, each user on its own.
    py_admin = _py_admin(sec, bootstrap, "admin")
    try:
        got = py_admin.alter_user_scram_credentials(
            [
                PyUpsertion("nobody", PyScramMechanism.SCRAM_SHA_256, b"pw"),
                PyDeletion(key_id, PyScramMechanism.SCRAM_SHA_256),  # it has none
            ]
        )
        assert set(got) == {"nobody", key_id} and all(got.values()), got
        assert py_admin.alter_user_scram_credentials(
            [PyDeletion(key_id, PyScramMechanism.SCRAM_SHA_512)]
        ) == {key_id: None}
    finally:
        py_admin.close()
    assert not _scram_login_works(bootstrap, key_id, "chosen-by-admin", "SCRAM-SHA-512")
    low = UserScramCredentialUpsertion(
        key_id, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw"
    )
    with pytest.raises(KafkaException) as refused:
        admin.alter_user_scram_credentials([low])[key_id].result(timeout=30)
    assert refused.value.args[0].name() == "UNACCEPTABLE_CREDENTIAL"
    # Without ALTER on the cluster: refused, nothing stored.
    outsider = _admin(sec, bootstrap, "heidi")
    with pytest.raises(KafkaException) as denied:
        outsider.alter_user_scram_credentials([upsert])[key_id].result(timeout=30)
    assert denied.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
    assert ScramRepo(sec.engine).described().get(key_id) is None


def test_delete_records_needs_delete_on_the_topic(env: Env) -> None:
    """Kafka's ACL for DeleteRecords: DELETE on the topic (READ and DESCRIBE are not enough)."""
    sec, bootstrap = env
    topic = f"dr-{uuid.uuid4().hex[:8]}"
    hot_only = {"remote.storage.enable": "false"}
    admin = _admin(sec, bootstrap, "admin")
    admin.create_topics([NewTopic(topic, 1, 1, config=hot_only)])[topic].result(timeout=30)
    sec.allow("judy", "topic", topic, "read", "describe")
    settle()
    judy = _admin(sec, bootstrap, "judy")
    [future] = judy.delete_records([TopicPartition(topic, 0, 0)]).values()
    with pytest.raises(KafkaException) as denied:
        future.result(timeout=30)
    assert denied.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    sec.allow("judy", "topic", topic, "delete")
    # A new connection: a Kafka connection's ACLs are refreshed when it logs in.
    judy = _admin(sec, bootstrap, "judy")
    [future] = judy.delete_records([TopicPartition(topic, 0, 0)]).values()
    assert future.result(timeout=30).low_watermark == 0
