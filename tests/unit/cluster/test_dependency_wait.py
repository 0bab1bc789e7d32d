from __future__ import annotations

import pytest

from cluster.dependency_wait import (
    DependencyUnavailableError,
    set_startup_wait_s,
    startup_wait_s,
    wait_for,
)


class Flaky:
    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError(f"refused #{self.calls}\nsecond line")
        return "up"


def test_retries_until_the_dependency_answers() -> None:
    naps: list[float] = []
    flaky = Flaky(3)
    assert (
        wait_for("thing", flaky, retry_on=(ConnectionError,), timeout_s=60, sleep=naps.append)
        == "up"
    )
    assert flaky.calls == 4
    assert naps == [0.5, 1.0, 2.0]  # backoff doubles


def test_gives_up_after_the_budget_naming_the_dependency() -> None:
    with pytest.raises(
        DependencyUnavailableError,
        match=r"thing still unreachable after 0s \(1 attempts\): ConnectionError: refused #1$",
    ):
        wait_for("thing", Flaky(99), retry_on=(ConnectionError,), timeout_s=0, sleep=lambda _: None)


def test_other_errors_are_not_retried() -> None:
    def broken() -> None:
        raise PermissionError("denied")

    with pytest.raises(PermissionError):
        wait_for("thing", broken, retry_on=(ConnectionError,), timeout_s=60)


def test_the_budget_comes_from_the_settings_table() -> None:
    """TIERLOG_STARTUP_WAIT_S is parsed once, by the role's table; the composition root
    hands the value to set_startup_wait_s."""
    from cluster.node_settings import STARTUP_WAIT_S
    from cluster.settings_table import SettingsError, SettingsTable

    table = SettingsTable("t", "", (STARTUP_WAIT_S,))
    assert startup_wait_s() == 60.0
    try:
        set_startup_wait_s(table.resolve({"TIERLOG_STARTUP_WAIT_S": "2.5"})[STARTUP_WAIT_S])
        assert startup_wait_s() == 2.5
    finally:
        set_startup_wait_s(60.0)
    with pytest.raises(SettingsError, match="TIERLOG_STARTUP_WAIT_S must be a number"):
        table.resolve({"TIERLOG_STARTUP_WAIT_S": "soon"})
    with pytest.raises(SettingsError, match="TIERLOG_STARTUP_WAIT_S must be 0 or more"):
        table.resolve({"TIERLOG_STARTUP_WAIT_S": "-1"})
