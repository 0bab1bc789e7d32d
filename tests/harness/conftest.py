"""The in-process cluster for the harness tests: one per file (each test with topics of its
own), every link restored and every lease current after each test. Not one per session:
three idle brokers would go on heartbeating in the worker, on the suite's shared cores,
until the run ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.harness.cluster import InProcessCluster


@pytest.fixture(scope="module")
def _shared(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessCluster]:
    c = InProcessCluster(db_factory(), tmp_path_factory.mktemp("harness"), 3).start()
    yield c
    c.stop()


@pytest.fixture
def cluster(_shared: InProcessCluster) -> Iterator[InProcessCluster]:
    yield _shared
    _shared.recover()
