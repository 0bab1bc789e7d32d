"""Kafka's ACL admin (DescribeAcls, CreateAcls, DeleteAcls) over the one ACL store the HTTP
API and `tierlog acls` use (metadata/security.py): Kafka's numeric codes to tierlog's
bindings and back, and Kafka's filter rules (AclBindingFilter).

A filter matches a binding when each of its fields is ANY (or null) or equal; a pattern type
MATCH matches the bindings that would apply to the named resource (the literal name, the
literal `*`, or a prefix of it). tierlog's ACLs have no host: bindings are shown with host
`*`, and one for another host is refused.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple

from metadata.acl import WILDCARD, AclBinding, validate
from metadata.security import SecurityRepo

ANY, MATCH = 1, 2
RESOURCE_TYPES = {2: "topic", 3: "group", 4: "cluster"}
PATTERN_TYPES = {3: "literal", 4: "prefixed"}
OPERATIONS = {2: "all", 3: "read", 4: "write", 5: "create", 6: "delete", 7: "alter", 8: "describe"}
PERMISSIONS = {2: "deny", 3: "allow"}
ANY_HOST = "*"


def code_of(table: dict[int, str], name: str) -> int:
    return next(code for code, n in table.items() if n == name)


class AclRefused(ValueError):
    """A binding or filter outside what tierlog's ACLs hold; the message says which field."""


class KafkaAcl(NamedTuple):
    """A binding in Kafka's terms (codes as Kafka numbers them)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


class KafkaAclFilter(NamedTuple):
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int


def _named(table: dict[int, str], code: int, what: str) -> str:
    name = table.get(code)
    if name is None:
        raise AclRefused(f"{what} {code} is not one tierlog's ACLs hold")
    return name


def to_binding(acl: KafkaAcl) -> AclBinding:
    if acl.host != ANY_HOST:
        raise AclRefused(f"host {acl.host!r}: tierlog's ACLs apply to every host ('*')")
    try:
        return validate(
            AclBinding(
                acl.principal,
                _named(RESOURCE_TYPES, acl.resource_type, "resource type"),
                _named(PATTERN_TYPES, acl.pattern_type, "pattern type"),
                acl.resource_name,
                _named(OPERATIONS, acl.operation, "operation"),
                _named(PERMISSIONS, acl.permission, "permission"),
            )
        )
    except AclRefused:
        raise
    except ValueError as exc:
        raise AclRefused(str(exc)) from None


def to_kafka(b: AclBinding) -> KafkaAcl:
    return KafkaAcl(
        code_of(RESOURCE_TYPES, b.resource_type),
        b.resource_name,
        code_of(PATTERN_TYPES, b.pattern_type),
        b.principal,
        ANY_HOST,
        code_of(OPERATIONS, b.operation),
        code_of(PERMISSIONS, b.permission),
    )


def _pattern_matches(f: KafkaAclFilter, acl: KafkaAcl) -> bool:
    if f.pattern_type == MATCH:
        if f.resource_name is None:
            return True
        if acl.pattern_type == code_of(PATTERN_TYPES, "prefixed"):
            return f.resource_name.startswith(acl.resource_name)
        return acl.resource_name in (f.resource_name, WILDCARD)
    if f.pattern_type not in (ANY, acl.pattern_type):
        return False
    return f.resource_name is None or f.resource_name == acl.resource_name


def matches(f: KafkaAclFilter, acl: KafkaAcl) -> bool:
    return (
        f.resource_type in (ANY, acl.resource_type)
        and _pattern_matches(f, acl)
        and f.principal in (None, acl.principal)
        and f.host in (None, acl.host)
        and f.operation in (ANY, acl.operation)
        and f.permission in (ANY, acl.permission)
    )


class KafkaAclAdmin:
    """The store's reads and writes, off the event loop."""

    def __init__(self, repo: SecurityRepo) -> None:
        self.repo = repo

    async def describe(self, f: KafkaAclFilter) -> list[KafkaAcl]:
        rows = await asyncio.to_thread(self.repo.acls)
        kafka = (to_kafka(b) for b in rows if b.resource_type in RESOURCE_TYPES.values())
        return [a for a in kafka if matches(f, a)]  # a registry subject's ACL is not Kafka's

    async def create(self, acl: KafkaAcl) -> None:
        """Adding a binding that exists is no error (Kafka's CreateAcls is idempotent)."""
        await asyncio.to_thread(self.repo.add_acl, to_binding(acl))

    async def delete(self, f: KafkaAclFilter) -> list[KafkaAcl]:
        """The bindings the filter matched, each deleted."""
        gone = []
        for acl in await self.describe(f):
            if await asyncio.to_thread(self.repo.remove_acl, to_binding(acl)):
                gone.append(acl)
        return gone
