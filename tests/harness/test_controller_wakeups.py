"""The controller duty's periodic look is slow (`controller_tick_ms`, 500 ms by default); a
new metadata version wakes every broker's duty at once, so a controller that resigns is
replaced without waiting for the others' next look. Here the look is a minute apart: any
move within the test is a wake-up's."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.harness.cluster import InProcessCluster
from tests.integration.cluster import wait_for

SLOW_LOOK_MS = 60_000


@pytest.fixture(scope="module")
def slow(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessCluster]:
    c = InProcessCluster(db_factory(), tmp_path_factory.mktemp("wakeups"), 2)
    for node in c.brokers.values():
        node.config = node.config._replace(controller_tick_ms=SLOW_LOOK_MS)
    yield c.start()
    c.stop()


def test_a_new_metadata_version_wakes_the_controller_duty(slow: InProcessCluster) -> None:
    slow.create_topic("woken", rf=2)  # the version moves: both brokers look, one holds the lease
    held = wait_for(
        "a controller",
        lambda: [i for i, n in slow.brokers.items() if n.b.controller.epoch is not None] or None,
        timeout=10,
    )
    first = held[0]
    other = slow.brokers[3 - first]
    slow.brokers[first].close()  # a clean stop resigns: the release moves the version
    wait_for("the other broker took over", lambda: other.b.controller.epoch, timeout=10)
