"""The console's Topics pages in a real browser: create, see, configure, grow, delete."""

from __future__ import annotations

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.integration.console_browser import (  # noqa: F401
    ConsoleStack,
    browser_fixture,
    console_fixture,
)


def _submit(stack: ConsoleStack, form: str, **fields: str) -> None:
    for name, value in fields.items():
        box = stack.find(f"{form} input[name='{name}']")
        box.clear()
        box.send_keys(value)
    stack.find(f"{form} button[type=submit]").click()


def _has(css: str, text: str) -> object:
    def check(d: WebDriver) -> bool:
        found = d.find_elements(By.CSS_SELECTOR, css)
        return bool(found) and text in found[0].text

    return check


def test_create_a_topic_and_see_it_in_the_list_and_its_page(browser: ConsoleStack) -> None:
    browser.visit("/topics", "topics-empty")
    _submit(browser, "#create-form", name="orders", partitions="2", retention_ms="86400000")
    browser.wait(_has("#topic-name", "orders"))  # htmx followed HX-Redirect to its page
    browser.broker.produce("orders", [{"value": f"v{i}", "partition": 1} for i in range(5)])

    browser.visit("/topics", "topics")
    row = browser.text("#topics tr[data-topic='orders']")
    assert row.startswith("orders 2 1 5 "), row  # partitions, RF, records
    assert "1 d" in browser.text("#topics tr[data-topic='orders'] [data-col=retention]")
    # A second create of the same name: the API's error, readable, in the form.
    _submit(browser, "#create-form", name="orders", partitions="1", retention_ms="")
    browser.wait(_has("#create-card .error", "TOPIC_ALREADY_EXISTS"))
    browser.screenshot("topics-create-error")

    browser.visit("/topics/orders", "topic")
    p1 = browser.text("#partitions tr[data-partition='1']")
    assert p1.startswith("1 1 1 1 [0, 5)"), p1  # partition, leader, replicas, ISR, hot range


def test_edit_configs_with_validation_errors_shown(browser: ConsoleStack) -> None:
    browser.broker.create_topic("configured")
    browser.visit("/topics/configured", "topic-configs")
    _submit(browser, "#configs-form", **{"cfg.retention.ms": "3600000"})
    browser.wait(_has("#configs-notice", "Saved retention.ms"))
    assert browser.broker.http.get("/topics/configured").json()["configs"]["retention.ms"] == (
        "3600000"
    )
    _submit(browser, "#configs-form", **{"cfg.min.insync.replicas": "zero"})
    browser.wait(_has("#configs-card .error", "INVALID_CONFIG"))
    # The rejected value stays in its field, next to the error.
    assert browser.find("input[name='cfg.min.insync.replicas']").get_attribute("value") == "zero"
    browser.screenshot("topic-config-error")


def test_grow_then_delete_with_confirmation(browser: ConsoleStack) -> None:
    browser.broker.create_topic("doomed")
    browser.visit("/topics/doomed")
    _submit(browser, "#grow-form", partitions="3")
    browser.wait(_has("#grown-notice", "now has 3 partitions"))
    assert len(browser.driver.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")) == 3
    _submit(browser, "#grow-form", partitions="2")  # shrinking is refused by the API
    browser.wait(_has("#grow-card .error", "INVALID_PARTITIONS"))

    browser.find("#delete-link").click()
    browser.wait(_has("h1", "delete"))
    browser.screenshot("topic-delete")
    _submit(browser, "#delete-form", confirm_name="wrong")
    browser.wait(_has("#delete-card .error", "type the topic's name"))
    assert browser.broker.http.get("/topics/doomed").status_code == 200
    _submit(browser, "#delete-form", confirm_name="doomed")
    browser.wait(_has("#deleted-notice", "doomed"))
    assert browser.broker.http.get("/topics/doomed").status_code == 404
    assert not browser.driver.find_elements(By.CSS_SELECTOR, "tr[data-topic='doomed']")
