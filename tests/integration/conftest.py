"""Fixtures that start real broker processes against the suite's real Postgres."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from metadata.db import make_engine
from tests.integration.brokers import BrokerProcess


@pytest.fixture
def broker_factory(fresh_db: str, tmp_path: Path) -> Iterator[object]:
    started: list[BrokerProcess] = []

    def make(
        broker_id: int = 1, extra_args: list[str] | None = None, start: bool = True
    ) -> BrokerProcess:
        b = BrokerProcess(fresh_db, tmp_path / f"data-{broker_id}", broker_id, extra_args)
        started.append(b)
        return b.start() if start else b

    yield make
    for b in started:
        b.stop()


@pytest.fixture(scope="module")
def module_broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """One broker (on its own database) for a whole module: for tests that each use their own
    topics and groups and leave the broker as they found it (a broker start takes seconds)."""
    b = BrokerProcess(db_factory(), tmp_path_factory.mktemp("module-broker") / "data-1", 1)
    try:
        yield b.start()
    finally:
        b.stop()


@pytest.fixture
def broker(broker_factory: object) -> BrokerProcess:
    assert callable(broker_factory)
    b = broker_factory()
    assert isinstance(b, BrokerProcess)
    return b


@pytest.fixture
def engine(fresh_db: str) -> Iterator[Engine]:
    """A SQLAlchemy engine on the test's own database."""
    e = make_engine(fresh_db)
    yield e
    e.dispose()
