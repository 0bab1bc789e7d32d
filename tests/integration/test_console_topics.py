"""The console's sign-in and Topics pages in a real browser, with auth on: sign in, create,
see, configure, grow, delete."""

from __future__ import annotations

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.integration.console_browser import (  # noqa: F401
    ConsoleStack,
    secure_browser_fixture,
    secure_console_fixture,
)
from tests.integration.console_login import SESSION_COOKIE, signed_in
from tests.integration.secured import ADMIN


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


def _signed_in(stack: ConsoleStack) -> ConsoleStack:
    if stack.driver.get_cookie(SESSION_COOKIE) is None:
        stack.sign_in()
    return stack


def test_sign_in_with_an_api_key(secure_browser: ConsoleStack) -> None:
    browser = secure_browser
    browser.driver.delete_all_cookies()
    browser.visit("/topics", "login")  # the cluster wants a key: the console asks for one
    browser.wait(_has("h1", "Sign in"))
    assert "next=/topics" in browser.driver.current_url
    box = browser.find("#login-form input[name=api_key]")
    box.send_keys("tlk_not_a_key")
    browser.find("#login-form button[type=submit]").click()
    browser.wait(_has("#login-card .error", "SASL_AUTHENTICATION_FAILED"))
    browser.screenshot("login-error")
    browser.sign_in()
    cookie = browser.driver.get_cookie(SESSION_COOKIE)
    assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert browser.secured is not None and browser.secured.key(ADMIN) != cookie["value"]
    assert browser.driver.execute_script("return document.cookie") == ""  # no script reads it
    browser.find("form[action='/logout'] button").click()
    browser.wait(_has("h1", "Sign in"))
    assert browser.driver.get_cookie(SESSION_COOKIE) is None


def test_create_a_topic_and_see_it_in_the_list_and_its_page(secure_browser: ConsoleStack) -> None:
    browser = _signed_in(secure_browser)
    browser.visit("/topics", "topics-empty")
    _submit(browser, "#create-form", name="orders", partitions="2", retention_ms="86400000")
    browser.wait(_has("#topic-name", "orders"))  # htmx followed HX-Redirect to its page
    records = [{"value": f"v{i}", "partition": 1} for i in range(5)]
    assert browser.api.post("/topics/orders/records", json={"records": records}).status_code == 200

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


def test_edit_configs_with_validation_errors_shown(secure_browser: ConsoleStack) -> None:
    browser = _signed_in(secure_browser)
    assert browser.api.post("/topics", json={"name": "configured"}).status_code == 201
    browser.visit("/topics/configured", "topic-configs")
    _submit(browser, "#configs-form", **{"cfg.retention.ms": "3600000"})
    browser.wait(_has("#configs-notice", "Saved retention.ms"))
    assert browser.api.get("/topics/configured").json()["configs"]["retention.ms"] == ("3600000")
    _submit(browser, "#configs-form", **{"cfg.min.insync.replicas": "zero"})
    browser.wait(_has("#configs-card .error", "INVALID_CONFIG"))
    # The rejected value stays in its field, next to the error.
    assert browser.find("input[name='cfg.min.insync.replicas']").get_attribute("value") == "zero"
    browser.screenshot("topic-config-error")


def test_grow_then_delete_with_confirmation(secure_browser: ConsoleStack) -> None:
    browser = _signed_in(secure_browser)
    assert browser.api.post("/topics", json={"name": "doomed"}).status_code == 201
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
    assert browser.api.get("/topics/doomed").status_code == 200
    _submit(browser, "#delete-form", confirm_name="doomed")
    browser.wait(_has("#deleted-notice", "doomed"))
    assert browser.api.get("/topics/doomed").status_code == 404
    assert not browser.driver.find_elements(By.CSS_SELECTOR, "tr[data-topic='doomed']")


def test_api_errors_render_as_pages_never_traces(secure_console: ConsoleStack) -> None:
    assert secure_console.secured is not None
    with signed_in(secure_console.url, secure_console.secured.key("User:admin")) as admin:
        r = admin.get("/topics/no-such-topic")
    assert r.status_code == 404 and "UNKNOWN_TOPIC_OR_PARTITION" in r.text
    assert "Traceback" not in r.text and "<nav>" in r.text
    # No such session (ended, expired, or made up): back to the login page.
    r = httpx.get(f"{secure_console.url}/topics", cookies={SESSION_COOKIE: "gone"})
    assert r.status_code == 303 and r.headers["location"] == "/login?next=/topics"
