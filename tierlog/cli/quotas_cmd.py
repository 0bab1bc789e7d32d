"""`tierlog quotas set|list|remove`: per-principal byte-rate quotas (Kafka's
`kafka-configs --entity-type users --alter --add-config producer_byte_rate=…`).

Quotas live in Postgres (metadata/quotas.py), so the command talks to the database, as the
operator's tool; brokers pick changes up within a few seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from logformat.errors import ErrorCode, TierlogError

if TYPE_CHECKING:
    from metadata.quotas import QuotaEntry, QuotaRepo

DEFAULT_ENTITY = "<default>"  # metadata.quotas.DEFAULT_ENTITY (imported lazily there)


def add_quotas(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--database-url", default=os.environ.get("TIERLOG_DATABASE_URL"))
    who = argparse.ArgumentParser(add_help=False)
    target = who.add_mutually_exclusive_group(required=True)
    target.add_argument("--principal", help="e.g. User:alice")
    target.add_argument(
        "--default", action="store_true", help=f"the {DEFAULT_ENTITY} entity: every principal"
    )

    q = sub.add_parser("quotas", help="per-principal produce/fetch byte-rate quotas")
    qsub = q.add_subparsers(dest="action", required=True)
    s = qsub.add_parser("set", parents=[common, who], help="set byte rates (bytes/s)")
    s.add_argument("--producer-byte-rate", type=int, default=None)
    s.add_argument("--consumer-byte-rate", type=int, default=None)
    s.set_defaults(func=_set)
    ls = qsub.add_parser("list", parents=[common], help="every quota entity and its rates")
    ls.set_defaults(func=_list)
    rm = qsub.add_parser("remove", parents=[common, who], help="unset rates (all by default)")
    rm.add_argument("--producer-byte-rate", action="store_true", help="only this rate")
    rm.add_argument("--consumer-byte-rate", action="store_true", help="only this rate")
    rm.set_defaults(func=_remove)


def _entity(args: argparse.Namespace) -> str:
    return DEFAULT_ENTITY if args.default else str(args.principal)


def _repo(args: argparse.Namespace) -> QuotaRepo:
    from metadata.db import make_engine
    from metadata.quotas import QuotaRepo

    if not args.database_url:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, "--database-url or TIERLOG_DATABASE_URL is required"
        )
    return QuotaRepo(make_engine(args.database_url))


def _line(entry: QuotaEntry) -> str:
    """ENTITY<tab>rate=value… (the rates it sets), as `tierlog acls list` prints bindings."""
    rates = [
        f"{name}={value}"
        for name, value in (
            ("producer_byte_rate", entry.producer_byte_rate),
            ("consumer_byte_rate", entry.consumer_byte_rate),
        )
        if value is not None
    ]
    return "\t".join([entry.entity, *rates])


def _set(args: argparse.Namespace) -> int:
    rates = {
        k: v
        for k, v in (
            ("producer_byte_rate", args.producer_byte_rate),
            ("consumer_byte_rate", args.consumer_byte_rate),
        )
        if v is not None
    }
    if not rates:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, "give --producer-byte-rate and/or --consumer-byte-rate"
        )
    print("set     " + _line(_repo(args).set(_entity(args), rates)))
    return 0


def _list(args: argparse.Namespace) -> int:
    for entry in _repo(args).entries():
        print(_line(entry))
    return 0


def _remove(args: argparse.Namespace) -> int:
    keys = tuple(
        k
        for k, chosen in (
            ("producer_byte_rate", args.producer_byte_rate),
            ("consumer_byte_rate", args.consumer_byte_rate),
        )
        if chosen
    ) or ("producer_byte_rate", "consumer_byte_rate")
    if not _repo(args).remove(_entity(args), keys):
        print(f"tierlog: no such quota for {_entity(args)}", file=sys.stderr)
        return 1
    print(f"removed {_entity(args)}\t{','.join(keys)}")
    return 0
