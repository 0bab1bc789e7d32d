"""Kafka's ACL rules (metadata/acl.py): matching, implied describe, deny wins, no ACL → no."""

from __future__ import annotations

import pytest

from metadata.acl import AclBinding, allowed, allowed_on_any, validate
from metadata.api_keys import hash_secret, new_key, parse_key, verify_secret


def b(
    op: str,
    name: str = "orders",
    *,
    who: str = "User:alice",
    rtype: str = "topic",
    prefixed: bool = False,
    deny: bool = False,
) -> AclBinding:
    return AclBinding(
        who, rtype, "prefixed" if prefixed else "literal", name, op, "deny" if deny else "allow"
    )


def ok(acls: list[AclBinding], op: str, name: str = "orders", who: str = "User:alice") -> bool:
    return allowed(acls, who, "topic", name, op)


def test_no_acl_means_denied() -> None:
    assert not ok([], "read")
    assert not ok([b("read", who="User:bob")], "read")
    assert not ok([b("read", rtype="group")], "read")


def test_literal_prefixed_and_wildcard_names() -> None:
    assert ok([b("read")], "read")
    assert not ok([b("read")], "read", "orders2")
    assert ok([b("read", "ord", prefixed=True)], "read", "orders2")
    assert not ok([b("read", "ord")], "read", "orders2")  # literal "ord" is not a prefix
    assert ok([b("read", "*")], "read", "anything")
    assert not ok([b("read", "*", prefixed=True)], "read", "anything")  # prefix "*" is literal


def test_any_user_principal() -> None:
    assert ok([b("write", who="User:*")], "write", who="User:zed")


def test_operations_and_all() -> None:
    assert not ok([b("read")], "write")
    assert ok([b("all")], "write")
    assert ok([b("all")], "delete")


@pytest.mark.parametrize("op", ["read", "write", "delete", "alter", "describe", "all"])
def test_describe_is_implied(op: str) -> None:
    assert ok([b(op)], "describe")


def test_create_does_not_imply_describe() -> None:
    assert not ok([b("create")], "describe")


def test_deny_overrides_allow() -> None:
    acls = [b("all", "o", prefixed=True), b("write", deny=True)]
    assert not ok(acls, "write")
    assert ok(acls, "read")
    assert not ok(acls, "write", "x-o")  # prefix o does not match x-o
    assert ok(acls, "write", "o2")
    assert not ok([b("read"), b("all", deny=True)], "read")
    assert not ok([b("read"), b("read", "*", who="User:*", deny=True)], "read")


def test_deny_is_never_implied() -> None:
    assert ok([b("describe"), b("read", deny=True)], "describe")
    assert not ok([b("read"), b("describe", deny=True)], "describe")


def test_allowed_on_any_resource() -> None:
    assert allowed_on_any([b("write", "x")], "User:alice", "topic", "write")
    assert not allowed_on_any([b("read", "x")], "User:alice", "topic", "write")
    assert not allowed_on_any(
        [b("write", "x"), b("write", "*", deny=True)], "User:alice", "topic", "write"
    )


def test_validate_rejects_names_outside_kafka_vocabulary() -> None:
    validate(b("read"))
    for bad in (
        b("fly"),
        b("read", who="alice"),
        b("read", ""),
        b("read", rtype="broker"),
        b("read", "c", rtype="cluster"),
    ):
        with pytest.raises(ValueError):
            validate(bad)


def test_key_format_and_hash() -> None:
    token, parsed = new_key()
    assert parse_key(token) == parsed
    assert token.startswith(f"tlk_{parsed.key_id}_")
    salt, digest = hash_secret(parsed.secret)
    assert verify_secret(parsed.secret, salt, digest)
    assert not verify_secret(parsed.secret + "x", salt, digest)
    assert hash_secret(parsed.secret)[1] != digest  # salted
    for bad in ("", "tlk_", "tlk_abc_" + "x" * 40, "xyz_0123456789ab_" + "x" * 40, token[:20]):
        assert parse_key(bad) is None
