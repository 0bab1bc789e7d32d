"""The console's Consumer groups page in a real browser (issue 20 item 4): a group's lag in
records and in time moves as it commits, its trend chart draws, and a reset is previewed
(nothing written) before it is applied."""

from __future__ import annotations

from typing import Any

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.integration.console_browser import (  # noqa: F401
    ConsoleStack,
    browser_fixture,
    console_fixture,
)

TOPIC = "console-groups"


def commit(browser: ConsoleStack, group: str, offset: int) -> None:
    body = {"offsets": [{"topic": TOPIC, "partition": 0, "offset": offset}]}
    r = browser.broker.http.post(f"/groups/{group}/offsets", json=body)
    assert r.status_code == 200, r.text


def committed(browser: ConsoleStack, group: str) -> Any:
    return browser.broker.http.get(f"/groups/{group}/offsets").json()["offsets"][0]["offset"]


def test_group_lag_moves_as_the_consumer_commits(browser: ConsoleStack) -> None:
    browser.broker.create_topic(TOPIC, partitions=1)
    browser.broker.produce(TOPIC, [{"value": f"v{i}", "partition": 0} for i in range(10)])
    commit(browser, "billing", 2)
    browser.visit("/groups", "groups")
    assert browser.text("#groups tr[data-group='billing'] td:nth-child(5)") == "8"
    browser.visit("/groups/billing", "group-lag")
    row = f"#offsets tr[data-tp='{TOPIC}-0']"
    assert browser.text(f"{row} .lag") == "8"
    assert browser.text(f"{row} .age").endswith(("ms", "s")), browser.text(f"{row} .age")
    commit(browser, "billing", 10)
    browser.visit("/groups/billing", "group-lag")
    assert browser.text(f"{row} .lag") == "0" and browser.text(f"{row} .age") == "0 ms"
    assert browser.text("#stat-lag") == "0"
    # The trend: the sampler's points (every second here) and the visits', drawn by uPlot.
    browser.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#lag-chart.drawn canvas"))
    lag = httpx.get(f"{browser.url}/groups/billing/lag.json").json()["series"]["records"]
    assert {8.0, 0.0} <= {v for _, v in lag}, lag  # it moved from 8 to 0
    browser.screenshot("group-lag")


def test_reset_is_previewed_then_applied(browser: ConsoleStack) -> None:
    commit(browser, "resets", 10)
    page = browser.visit("/groups/resets")
    Select(browser.find("#reset-to")).select_by_value("offset")
    browser.find("#reset-value").send_keys("4")
    browser.find("#reset-preview").click()
    cell = f"#reset-preview-table tr[data-tp='{TOPIC}-0'] .new-offset"
    assert browser.text(cell) == "4"
    assert committed(browser, "resets") == 10  # a preview writes nothing
    browser.screenshot("group-reset-preview")
    browser.find("#reset-apply").click()
    page.switch_to.alert.accept()  # data-confirm asks first
    assert "Reset 1 partition(s)" in browser.text("#notice")
    assert committed(browser, "resets") == 4
    assert browser.text(f"#offsets tr[data-tp='{TOPIC}-0'] .lag") == "6"
    # Bad input is a readable error on the page, not a trace.
    Select(browser.find("#reset-to")).select_by_value("datetime")
    browser.find("#reset-value").send_keys("yesterday")
    browser.find("#reset-preview").click()
    assert browser.text(".error .error-name") == "INVALID_REQUEST"
    assert "not a date and time" in browser.text(".error .error-message")
