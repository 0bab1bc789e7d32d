"""The console's app and Overview page in a real browser (tests/integration/console_browser.py)."""

from __future__ import annotations

import httpx

from tests.integration.console_browser import (  # noqa: F401
    ConsoleStack,
    browser_fixture,
    console_fixture,
)


def test_overview_shows_the_broker_and_draws_the_charts(browser: ConsoleStack) -> None:
    browser.broker.create_topic("console-overview", partitions=2)
    browser.broker.produce("console-overview", [{"value": "x", "partition": 0}] * 5)
    page = browser.visit("/", "overview")
    row = browser.text("#brokers tr[data-broker='1']")
    assert "alive" in row and "controller" in row and row.endswith("2"), row  # 2 leaderships
    assert browser.text("#stat-brokers") == "1 / 1"
    assert browser.find("#all-replicated")
    # Every chart is drawn by uPlot from the sampler's history (a canvas per chart).
    browser.wait(lambda d: len(d.find_elements("css selector", ".chart.drawn canvas")) == 6)
    # The status block is refreshed in place by htmx (every 5 s; here at once): a new topic
    # shows up without a reload.
    browser.broker.create_topic("console-overview-2", partitions=3)
    browser.driver.execute_script(
        "htmx.ajax('GET', '/overview/status', {target: '#overview-status', swap: 'outerHTML'})"
    )
    browser.wait(lambda d: d.find_element("css selector", "#stat-partitions").text == "5")
    assert "Topics" in page.find_element("css selector", "header nav").text
    browser.screenshot("overview")


def test_state_changing_requests_need_the_csrf_token(browser: ConsoleStack) -> None:
    # No token: refused with a readable error, the same with a token from another session.
    r = httpx.post(f"{browser.url}/logout", data={"csrf_token": "forged"})
    assert r.status_code == 403 and "INVALID_CSRF_TOKEN" in r.text
    assert "content-security-policy" in r.headers
    csp = httpx.get(f"{browser.url}/").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
