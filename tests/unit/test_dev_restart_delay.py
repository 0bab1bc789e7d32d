"""tierlog dev's first restart delay (TIERLOG_DEV_RESTART_DELAY_MS): default, set, refused."""

from __future__ import annotations

import pytest

from tierlog.devstack.supervisor import RESTART_DELAY_ENV, restart_delay_s


def test_unset_means_one_second_and_milliseconds_are_read() -> None:
    assert restart_delay_s({}) == 1.0
    assert restart_delay_s({RESTART_DELAY_ENV: " "}) == 1.0
    assert restart_delay_s({RESTART_DELAY_ENV: "100"}) == 0.1
    assert restart_delay_s({RESTART_DELAY_ENV: "0"}) == 0.0


@pytest.mark.parametrize("raw", ["fast", "1.5", "-1", "5001"])
def test_a_bad_value_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match=f"{RESTART_DELAY_ENV}='{raw}' is not a whole number"):
        restart_delay_s({RESTART_DELAY_ENV: raw})
