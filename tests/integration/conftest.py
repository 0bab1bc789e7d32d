"""Fixtures that start real broker processes against the suite's real Postgres, and the
suite's one SparkSession."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy.engine import Engine

from metadata.db import make_engine
from tests.integration.brokers import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession (one JVM) per test process, for every file that reads with Spark:
    its start costs tens of seconds of CPU (tests/conftest.py keeps those files in one unit of
    xdist work). pyspark is imported here, not at collection, which every worker does."""
    from spark_tables import tierlog_session

    session = tierlog_session(
        "tierlog-tests",
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "1g",
            # How long a Python worker (the tierlog source's reader, a streaming source's
            # runner) may take to connect back and authenticate (15 s by default): at load
            # 30-40 a streaming test failed with CANNOT_OPEN_SOCKET "timed out" at 15 s.
            "spark.python.authenticate.socketTimeout": "120s",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
