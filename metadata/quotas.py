"""Client quotas in Postgres (migration 0007): per-principal byte rates, Kafka's
`producer_byte_rate` and `consumer_byte_rate`, with a `<default>` entity.

Each rate resolves on its own: the principal's row, then `<default>`, else unlimited (Kafka's
per-key precedence for user quotas).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from sqlalchemy import BigInteger, Column, DateTime, MetaData, Table, Text, delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Engine

from logformat.errors import ErrorCode, TierlogError

DEFAULT_ENTITY = "<default>"
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate")
_PRINCIPAL = re.compile(r"^User:[^*\s]+$")

# Kept beside its repository (not in schema.py): only this module queries it.
client_quotas = Table(
    "client_quotas",
    MetaData(),
    Column("entity", Text, primary_key=True),
    Column("producer_byte_rate", BigInteger),
    Column("consumer_byte_rate", BigInteger),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)


class QuotaEntry(NamedTuple):
    entity: str
    producer_byte_rate: int | None
    consumer_byte_rate: int | None


class QuotaTable:
    """Every quota row, resolved per principal (an immutable snapshot brokers cache)."""

    def __init__(self, entries: Mapping[str, QuotaEntry] | None = None) -> None:
        self.entries = dict(entries or {})

    def rate(self, principal: str, key: str) -> int | None:
        """The byte rate `key` that applies to `principal`; None: unlimited."""
        for entity in (principal, DEFAULT_ENTITY):
            entry = self.entries.get(entity)
            value = getattr(entry, key) if entry is not None else None
            if value is not None:
                return int(value)
        return None


def check_entity(entity: str) -> str:
    if entity != DEFAULT_ENTITY and not _PRINCIPAL.match(entity):
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"a quota entity is a principal like User:alice, or {DEFAULT_ENTITY}; got {entity!r}",
        )
    return entity


def _check_rate(key: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or value <= 0):
        raise TierlogError(ErrorCode.INVALID_CONFIG, f"{key} must be > 0 bytes/s, got {value}")


class QuotaRepo:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def load(self) -> QuotaTable:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    client_quotas.c.entity,
                    client_quotas.c.producer_byte_rate,
                    client_quotas.c.consumer_byte_rate,
                )
            ).all()
        return QuotaTable({r.entity: QuotaEntry(*r) for r in rows})

    def entries(self) -> list[QuotaEntry]:
        return sorted(self.load().entries.values())

    def set(self, entity: str, rates: Mapping[str, int]) -> QuotaEntry:
        """Set the given rates of `entity`, keeping the ones not named."""
        check_entity(entity)
        if not rates or set(rates) - set(QUOTA_KEYS):
            raise TierlogError(ErrorCode.INVALID_CONFIG, f"quota keys are {', '.join(QUOTA_KEYS)}")
        for key, value in rates.items():
            _check_rate(key, value)
        ins = insert(client_quotas).values(entity=entity, **rates)
        stmt = ins.on_conflict_do_update(
            index_elements=[client_quotas.c.entity],
            set_={**{k: ins.excluded[k] for k in rates}, "updated_at": func.now()},
        ).returning(
            client_quotas.c.entity,
            client_quotas.c.producer_byte_rate,
            client_quotas.c.consumer_byte_rate,
        )
        with self.engine.begin() as conn:
            return QuotaEntry(*conn.execute(stmt).one())

    def remove(self, entity: str, keys: tuple[str, ...] = QUOTA_KEYS) -> bool:
        """Unset `keys` of `entity` (the row goes when none is left); False: nothing was set."""
        check_entity(entity)
        if set(keys) - set(QUOTA_KEYS):
            raise TierlogError(ErrorCode.INVALID_CONFIG, f"quota keys are {', '.join(QUOTA_KEYS)}")
        with self.engine.begin() as conn:
            row = conn.execute(
                select(client_quotas).where(client_quotas.c.entity == entity).with_for_update()
            ).one_or_none()
            if row is None:
                return False
            left = {k: getattr(row, k) for k in QUOTA_KEYS if k not in keys}
            if all(v is None for v in left.values()):
                conn.execute(delete(client_quotas).where(client_quotas.c.entity == entity))
            else:
                conn.execute(
                    client_quotas.update()
                    .where(client_quotas.c.entity == entity)
                    .values(**{k: None for k in keys}, updated_at=func.now())
                )
            return any(getattr(row, k) is not None for k in keys)
