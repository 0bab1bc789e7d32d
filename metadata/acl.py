"""Kafka's ACL model, pure: bindings, and the authorizer's decision over a set of them.

The rules are Kafka's (AclAuthorizer / StandardAuthorizer):
- a binding matches a principal when it names it or ``User:*``; a resource when it is the
  literal name, the literal ``*`` (every resource of the type), or a prefix of the name
  (pattern type ``prefixed``);
- any matching DENY for the operation (or ``all``) wins over every ALLOW;
- ``describe`` is implied by an ALLOW of read, write, delete or alter (so a producer or a
  consumer may look at the topics it uses); a DENY is never implied;
- no matching ALLOW → denied (``allow.everyone.if.no.acl.found=false``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

RESOURCE_TYPES = ("topic", "group", "cluster", "subject")  # subject: the Schema Registry's
PATTERN_TYPES = ("literal", "prefixed")
OPERATIONS = ("read", "write", "create", "delete", "alter", "describe", "all")
PERMISSIONS = ("allow", "deny")
CLUSTER_NAME = "kafka-cluster"  # the one cluster resource, named as in Kafka
WILDCARD = "*"
ANY_USER = "User:*"

_IMPLIES_DESCRIBE = frozenset({"describe", "read", "write", "delete", "alter", "all"})


class AclBinding(NamedTuple):
    principal: str
    resource_type: str
    pattern_type: str
    resource_name: str
    operation: str
    permission: str

    def matches_resource(self, resource_type: str, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == "prefixed":
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


def _check_principal(principal: str) -> None:
    """Kafka's principal syntax for ACLs: `User:NAME`, or `User:*` for every user. A name is
    not empty and holds no whitespace or control characters, and `*` only as the whole
    wildcard (Kafka matches principals literally: `User:a*` would never match anyone)."""
    name = principal[len("User:") :] if principal.startswith("User:") else ""
    if name == ANY_USER[len("User:") :]:
        return
    if not name or "*" in name or any(c.isspace() or not c.isprintable() for c in name):
        raise ValueError(
            "principal must read User:NAME (or User:* for every user), NAME without "
            f"spaces, control characters or '*'; got {principal!r}"
        )


def validate(binding: AclBinding) -> AclBinding:
    """The binding, or ValueError naming the first field out of Kafka's vocabulary."""
    checks = (
        ("resource type", binding.resource_type, RESOURCE_TYPES),
        ("pattern type", binding.pattern_type, PATTERN_TYPES),
        ("operation", binding.operation, OPERATIONS),
        ("permission", binding.permission, PERMISSIONS),
    )
    for what, value, allowed in checks:
        if value not in allowed:
            raise ValueError(f"{what} must be one of {', '.join(allowed)}; got {value!r}")
    _check_principal(binding.principal)
    if not binding.resource_name:
        raise ValueError("resource name must not be empty")
    if binding.resource_type == "cluster" and binding.resource_name != CLUSTER_NAME:
        raise ValueError(f"the cluster resource is named {CLUSTER_NAME!r}")
    return binding


def allowed(
    bindings: Iterable[AclBinding], principal: str, resource_type: str, name: str, operation: str
) -> bool:
    """Kafka's decision for one principal, resource and operation over `bindings`."""
    allow_ops = _IMPLIES_DESCRIBE if operation == "describe" else frozenset({operation, "all"})
    deny_ops = frozenset({operation, "all"})
    granted = False
    for b in bindings:
        if b.principal not in (principal, ANY_USER) or not b.matches_resource(resource_type, name):
            continue
        if b.permission == "deny":
            if b.operation in deny_ops:
                return False
        elif b.operation in allow_ops:
            granted = True
    return granted


def allowed_on_any(
    bindings: Iterable[AclBinding], principal: str, resource_type: str, operation: str
) -> bool:
    """Whether some resource of the type may take the operation (Kafka's
    authorizeByResourceType, used for idempotent producer ids since KIP-679): an ALLOW for
    the principal not cancelled by a DENY on every resource (the literal ``*``)."""
    ops = frozenset({operation, "all"})
    mine = [
        b
        for b in bindings
        if b.principal in (principal, ANY_USER)
        and b.resource_type == resource_type
        and b.operation in ops
    ]
    if any(
        b.permission == "deny" and b.pattern_type == "literal" and b.resource_name == WILDCARD
        for b in mine
    ):
        return False
    return any(b.permission == "allow" for b in mine)
