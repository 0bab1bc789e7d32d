"""`tierlog users create|list|revoke` and `tierlog acls add|list|remove`: straight to Postgres
(--database-url / TIERLOG_DATABASE_URL), like Kafka's kafka-acls against the metadata quorum.

Nodes pick changes up at once through NOTIFY (and within --auth-cache-ms at worst).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from logformat.errors import ErrorCode, TierlogError

if TYPE_CHECKING:
    from metadata.acl import AclBinding
    from metadata.security import SecurityRepo


def add_security_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument(
        "--database-url",
        default=os.environ.get("TIERLOG_DATABASE_URL"),
        help="the cluster's Postgres (default TIERLOG_DATABASE_URL)",
    )
    users = sub.add_parser("users", help="API keys: create, list, revoke")
    usub = users.add_subparsers(dest="action", required=True)
    c = usub.add_parser("create", parents=[db], help="a new key for USER (created if new)")
    c.add_argument("user", help="NAME or User:NAME")
    c.add_argument("--description", default=None)
    c.add_argument(
        "--key-from-env",
        metavar="VAR",
        default=None,
        help="store the key in $VAR (tlk_<12 hex>_<secret>) instead of making one; "
        "idempotent (bootstrapping an admin key in compose)",
    )
    c.set_defaults(func=_users_create)
    ls = usub.add_parser("list", parents=[db], help="keys (ids only, never secrets)")
    ls.set_defaults(func=_users_list)
    r = usub.add_parser("revoke", parents=[db], help="revoke USER's keys (or one with --key-id)")
    r.add_argument("user")
    r.add_argument("--key-id", default=None)
    r.set_defaults(func=_users_revoke)

    binding = argparse.ArgumentParser(add_help=False, parents=[db])
    binding.add_argument("--principal", required=True, help="User:NAME or User:*")
    what = binding.add_mutually_exclusive_group(required=True)
    what.add_argument("--topic", help="a topic name, a prefix (with --prefixed) or *")
    what.add_argument("--group", help="a group id, a prefix (with --prefixed) or *")
    what.add_argument("--cluster", action="store_true", help="the cluster resource")
    what.add_argument(
        "--subject", help="a Schema Registry subject, a prefix (with --prefixed) or *"
    )
    binding.add_argument("--prefixed", action="store_true", help="the name is a prefix")
    binding.add_argument(
        "--operation",
        action="append",
        required=True,
        choices=["read", "write", "create", "delete", "alter", "describe", "all"],
        help="repeatable",
    )
    binding.add_argument("--deny", action="store_true", help="a DENY binding (default ALLOW)")
    acls = sub.add_parser("acls", help="ACLs: add, list, remove (Kafka's model)")
    asub = acls.add_subparsers(dest="action", required=True)
    add = asub.add_parser("add", parents=[binding])
    add.set_defaults(func=_acls_add)
    rm = asub.add_parser("remove", parents=[binding])
    rm.set_defaults(func=_acls_remove)
    als = asub.add_parser("list", parents=[db])
    als.add_argument("--principal", default=None)
    als.set_defaults(func=_acls_list)


def _repo(args: argparse.Namespace) -> SecurityRepo:
    from metadata.db import make_engine, migrate
    from metadata.security import SecurityRepo

    if not args.database_url:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, "--database-url or TIERLOG_DATABASE_URL is required"
        )
    engine = make_engine(args.database_url, pool_size=1)
    migrate(engine)  # the tables exist even before any broker ran
    return SecurityRepo(engine)


def _invalid(exc: ValueError) -> TierlogError:
    return TierlogError(ErrorCode.INVALID_REQUEST, str(exc))


def _users_create(args: argparse.Namespace) -> int:
    key = None
    if args.key_from_env:
        key = os.environ.get(args.key_from_env)
        if not key:
            raise TierlogError(ErrorCode.INVALID_REQUEST, f"${args.key_from_env} is not set")
    try:
        principal, made = _repo(args).create_key(args.user, args.description, key)
    except ValueError as exc:
        raise _invalid(exc) from None
    if key is None:
        print(made)  # shown once: only its hash is stored
        print(f"created a key for {principal}; it is shown only now", file=sys.stderr)
    else:
        print(f"stored the key from ${args.key_from_env} for {principal}", file=sys.stderr)
    return 0


def _users_list(args: argparse.Namespace) -> int:
    for k in _repo(args).list_keys():
        state = f"revoked {k.revoked_at.isoformat()}" if k.revoked_at else "active"
        desc = f"\t{k.description}" if k.description else ""
        print(f"{k.principal}\t{k.key_id}\tcreated {k.created_at.isoformat()}\t{state}{desc}")
    return 0


def _users_revoke(args: argparse.Namespace) -> int:
    try:
        revoked = _repo(args).revoke(args.user, args.key_id)
    except ValueError as exc:
        raise _invalid(exc) from None
    if not revoked:
        raise TierlogError(ErrorCode.NOT_FOUND, f"no active key of {args.user} to revoke")
    print(f"revoked {len(revoked)} key(s): {', '.join(revoked)}", file=sys.stderr)
    return 0


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    from metadata.acl import CLUSTER_NAME, AclBinding, validate

    if args.cluster:
        rtype, name = "cluster", CLUSTER_NAME
    elif args.topic is not None:
        rtype, name = "topic", args.topic
    elif args.subject is not None:
        rtype, name = "subject", args.subject
    else:
        rtype, name = "group", args.group
    pattern = "prefixed" if args.prefixed else "literal"
    permission = "deny" if args.deny else "allow"
    try:
        return [
            validate(AclBinding(args.principal, rtype, pattern, name, op, permission))
            for op in dict.fromkeys(args.operation)
        ]
    except ValueError as exc:
        raise _invalid(exc) from None


def _show(b: AclBinding) -> str:
    return (
        f"{b.principal}\t{b.permission}\t{b.operation}\t{b.resource_type}:"
        f"{b.pattern_type}:{b.resource_name}"
    )


def _acls_add(args: argparse.Namespace) -> int:
    bindings = _bindings(args)
    repo = _repo(args)
    for b in bindings:
        print(("added   " if repo.add_acl(b) else "exists  ") + _show(b))
    return 0


def _acls_remove(args: argparse.Namespace) -> int:
    bindings = _bindings(args)
    repo = _repo(args)
    removed = [b for b in bindings if repo.remove_acl(b)]
    for b in removed:
        print("removed " + _show(b))
    if not removed:
        raise TierlogError(ErrorCode.NOT_FOUND, "no such ACL")
    return 0


def _acls_list(args: argparse.Namespace) -> int:
    for b in _repo(args).acls():
        if args.principal is None or b.principal == args.principal:
            print(_show(b))
    return 0
