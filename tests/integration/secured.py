"""A broker with auth on (the production default), keys for a few users, and helpers to
grant ACLs straight through the repository (what `tierlog acls add` does)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from http_transport.trust import default_trust
from metadata.acl import AclBinding
from metadata.db import make_engine
from metadata.security import SecurityRepo
from tests.integration.brokers import BrokerProcess

ADMIN = "User:admin"
CACHE_MS = 300  # short, so tests of revocation and ACL changes need not wait long
SECURE_ARGS = ["--super-users", ADMIN, "--auth-cache-ms", str(CACHE_MS)]


class Secured:
    """Keys by user name, the repository, and clients that send a user's key."""

    def __init__(self, database_url: str) -> None:
        self.engine = make_engine(database_url, pool_size=2)
        self.repo = SecurityRepo(self.engine)
        self.keys: dict[str, str] = {}
        self._clients: list[httpx.Client] = []

    def key(self, user: str) -> str:
        if user not in self.keys:
            self.keys[user] = self.repo.create_key(user)[1]
        return self.keys[user]

    def client(
        self, url: str, user: str | None, headers: dict[str, str] | None = None, **kw: Any
    ) -> httpx.Client:
        sent = {"authorization": f"Bearer {self.key(user)}"} if user else {}
        kw.setdefault("verify", default_trust())  # one context, not one per client
        c = httpx.Client(
            base_url=url,
            headers={**sent, **(headers or {})},
            timeout=30,
            **kw,
        )
        self._clients.append(c)
        return c

    def allow(self, user: str, rtype: str, name: str, *ops: str, prefixed: bool = False) -> None:
        self._add(user, rtype, name, ops, prefixed, "allow")

    def deny(self, user: str, rtype: str, name: str, *ops: str, prefixed: bool = False) -> None:
        self._add(user, rtype, name, ops, prefixed, "deny")

    def _add(
        self, user: str, rtype: str, name: str, ops: tuple[str, ...], prefixed: bool, perm: str
    ) -> None:
        principal = user if user.startswith("User:") else f"User:{user}"
        pattern = "prefixed" if prefixed else "literal"
        for op in ops:
            self.repo.add_acl(AclBinding(principal, rtype, pattern, name, op, perm))
        settle()

    def cluster_secret(self) -> str:
        with self.engine.connect() as conn:
            return str(conn.execute(text("SELECT secret FROM cluster")).scalar_one())

    def close(self) -> None:
        for c in self._clients:
            c.close()
        self.engine.dispose()


def settle() -> None:
    """Past the nodes' cache TTL: changes are visible even if a NOTIFY was missed."""
    time.sleep(CACHE_MS / 1000 + 0.1)


def secure_broker(
    database_url: str, data_dir: Path, broker_id: int = 1, extra: list[str] | None = None
) -> BrokerProcess:
    return BrokerProcess(
        database_url, data_dir, broker_id, [*SECURE_ARGS, *(extra or [])], secure=True
    )


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def started(b: BrokerProcess) -> Iterator[BrokerProcess]:
    b.start()
    try:
        yield b
    finally:
        b.stop()
