"""The Messages page in a real browser (tests/integration/console_browser.py's Chromium and
console process) against a broker whose topic is mostly in S3 (moto): browse from an
offset, search a key whose records are in the cold tier (the page says so), a key's
history, a JSON search cancelled and a live tail; no browser console errors."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.types import TopicIdPartition
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tests.integration.console_browser import (
    ConsoleProcess,
    ConsoleStack,
    _chromium,
    severe_entries,
)
from tests.integration.fetch_nodes import s3_env
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tiering.worker import TieringWorker

T_OLD = int(time.time() * 1000) - 3600_000  # an hour ago: local retention deletes at once
N = 120
TOPIC = "orders"


def record(i: int) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "key": f"customer-{i % 10}",
        "value": {"order": i, "customer": {"tier": "gold" if i % 3 == 0 else "silver"}},
        "timestamp": T_OLD + i * 1000,
        "headers": {"source": "shop"},
    }
    if i % 25 == 24:
        rec.pop("value")
        rec["value_b64"] = "3q2+7w=="  # de ad be ef: shown as hex
    return rec


def _tier(broker: BrokerProcess, database_url: str, bucket: Any) -> None:
    tid = broker.create_topic(TOPIC, segment_bytes=4096, local_retention_ms=1000)["id"]
    for lo in range(0, N, 10):
        broker.produce(TOPIC, [{**record(i), "partition": 0} for i in range(lo, lo + 10)])
    engine = make_engine(database_url)
    worker = TieringWorker(engine, bucket, "console-worker")
    manifest = ColdManifest(engine)
    try:

        def tiered() -> bool:
            worker.run_once()
            return (manifest.tiered_end_offset(TopicIdPartition(tid, 0)) or 0) >= N * 3 // 4

        wait_for("most of the topic tiered", tiered, timeout=90, every=0.3)
    finally:
        worker.close()
        engine.dispose()
    wait_for(
        "tiered segments deleted locally",
        lambda: (
            broker.http.get(f"/topics/{TOPIC}").json()["partitions"][0]["hot"]["start"] >= N // 2
        ),
        timeout=30,
    )


@pytest.fixture(scope="module")
def stack(
    db_factory: Callable[..., str],
    tmp_path_factory: pytest.TempPathFactory,
    moto_s3: MotoServer,
) -> Iterator[ConsoleStack]:
    root = tmp_path_factory.mktemp("console-messages")
    bucket = new_bucket(moto_s3)
    database_url = db_factory()
    app: ConsoleProcess | None = None
    driver: WebDriver | None = None
    with pytest.MonkeyPatch.context() as mp:
        for k, v in s3_env(bucket).items():
            mp.setenv(k, v)
        broker = BrokerProcess(database_url, root / "data-1", 1)
        try:
            broker.start()
            _tier(broker, database_url, bucket)
            app = ConsoleProcess(broker.url, root / "console.log").start()
            driver = _chromium()
            yield ConsoleStack(broker, app, driver)
        finally:
            if driver is not None:
                driver.quit()
            if app is not None:
                app.stop()
            broker.stop()


@pytest.fixture
def browser(stack: ConsoleStack) -> Iterator[ConsoleStack]:
    severe_entries(stack.driver)
    yield stack
    errors = severe_entries(stack.driver)
    assert not errors, f"browser console errors: {errors}"


def rows(b: ConsoleStack, table: str) -> list[Any]:
    return list(b.driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr.record"))


def search_done(b: ConsoleStack) -> None:
    b.wait(lambda d: d.find_element(By.ID, "search-panel").get_attribute("data-state") == "done")


def test_browse_from_an_offset_pretty_json_and_binary(browser: ConsoleStack) -> None:
    browser.visit(f"/messages?topic={TOPIC}&partition=0&position=offset&offset=20&limit=10")
    got = rows(browser, "records")
    assert [r.get_attribute("data-offset") for r in got] == [str(i) for i in range(20, 30)]
    assert '"tier": "gold"' in got[1].find_element(By.CSS_SELECTOR, "pre.payload-json").text
    binary = got[4].find_element(By.CSS_SELECTOR, ".payload-binary").text  # offset 24
    assert binary == "de ad be ef"
    assert "source: shop" in got[0].find_element(By.CSS_SELECTOR, "td.headers").text
    browser.visit(f"/messages?topic={TOPIC}&position=end&limit=5&binary=base64", "messages-end")
    assert [r.get_attribute("data-offset") for r in rows(browser, "records")] == [
        str(i) for i in range(N - 5, N)
    ]


def test_search_finds_cold_records_and_a_keys_history(browser: ConsoleStack) -> None:
    page = browser.visit(f"/messages?topic={TOPIC}", "messages")
    page.find_element(By.ID, "search-text").send_keys("customer-3")
    page.find_element(By.ID, "search-start").click()
    search_done(browser)
    hits = rows(browser, "search-results")
    assert [h.get_attribute("data-offset") for h in hits] == [str(i) for i in range(3, N, 10)]
    tiers = [h.get_attribute("data-tier") for h in hits]
    assert tiers[0] == "cold" and tiers[-1] == "hot", tiers
    assert hits[0].find_element(By.CSS_SELECTOR, ".tier-cold").text == "cold"
    summary = browser.text("#search-summary")
    assert summary.startswith(f"{len(hits)} hits") and "cold files" in summary
    browser.screenshot("messages-search-cold-hit")
    # A key's history: its link runs a key search over every offset.
    hits[0].find_element(By.CSS_SELECTOR, "a.history").click()
    search_done(browser)
    assert len(rows(browser, "search-results")) == len(range(3, N, 10))
    browser.screenshot("messages-key-history")


def test_json_search_with_a_cap_and_cancel(browser: ConsoleStack) -> None:
    page = browser.visit(f"/messages?topic={TOPIC}")
    Select(page.find_element(By.ID, "search-mode")).select_by_value("json")
    page.find_element(By.ID, "search-path").send_keys("customer.tier")
    page.find_element(By.ID, "search-text").send_keys("gold")
    cap = page.find_element(By.ID, "search-cap")
    cap.clear()
    cap.send_keys("4")
    page.find_element(By.ID, "search-start").click()
    search_done(browser)
    assert [h.get_attribute("data-offset") for h in rows(browser, "search-results")] == [
        "0",
        "3",
        "6",
        "9",
    ]
    assert "cap reached" in browser.text("#search-summary")
    # Cancel: the button aborts the stream (the console and the broker stop the scan).
    page.find_element(By.ID, "search-start").click()
    page.find_element(By.ID, "search-cancel").click()
    browser.wait(
        lambda d: (
            d.find_element(By.ID, "search-panel").get_attribute("data-state")
            in ("cancelled", "done")
        )
    )


def test_live_tail_shows_new_records_and_errors_are_readable(browser: ConsoleStack) -> None:
    page = browser.visit(f"/messages?topic={TOPIC}&position=end&limit=3")
    page.find_element(By.ID, "tail-toggle").click()
    browser.broker.produce(TOPIC, [{"key": "live", "value": "fresh", "partition": 0}])
    browser.wait(lambda d: rows(browser, "records")[-1].get_attribute("data-offset") == str(N))
    page.find_element(By.ID, "tail-toggle").click()
    browser.visit(f"/messages?topic={TOPIC}&position=offset&offset=999999", "messages-error")
    assert browser.text(".error .error-name") == "OFFSET_OUT_OF_RANGE"


def test_produce_form_sends_a_record_and_shows_where_it_went(browser: ConsoleStack) -> None:
    """Issue 27 item 4: key, value, headers and partition from the form; the page then shows
    the record at its offset; a bad header line is refused with what was typed kept."""
    page = browser.visit(f"/messages?topic={TOPIC}")
    page.find_element(By.CSS_SELECTOR, "#produce summary").click()
    page.find_element(By.ID, "produce-key").send_keys("form-key")
    page.find_element(By.ID, "produce-value").send_keys('{"from": "the console"}')
    page.find_element(By.ID, "produce-headers").send_keys("source=console\nnote=a=b")
    Select(page.find_element(By.ID, "produce-partition")).select_by_value("0")
    page.find_element(By.ID, "produce-submit").click()
    notice = browser.wait(lambda d: d.find_elements(By.ID, "produced"))[0].text
    assert notice.startswith(f"Produced to {TOPIC}: partition 0, offset "), notice
    offset = int(notice.split("offset ")[1].split(" ")[0])
    shown = rows(browser, "records")[0]
    assert shown.get_attribute("data-offset") == str(offset)
    assert "form-key" in shown.text and '"from": "the console"' in shown.text
    stored = browser.broker.fetch(TOPIC, 0, offset, max_records=1)["records"][0]
    assert stored["key"] == "form-key" and stored["value"] == {"from": "the console"}
    assert stored["headers"] == {"source": "console", "note": "a=b"}
    # A header line without "=": the API is not called, the form says why and keeps the value.
    page = browser.visit(f"/messages?topic={TOPIC}")
    page.find_element(By.CSS_SELECTOR, "#produce summary").click()
    page.find_element(By.ID, "produce-value").send_keys("kept")
    page.find_element(By.ID, "produce-headers").send_keys("no equals sign")
    page.find_element(By.ID, "produce-submit").click()
    browser.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#produce .error"))
    assert browser.text("#produce .error .error-name") == "INVALID_RECORD"
    assert "header line 1 is not name=value" in browser.text("#produce .error")
    assert page.find_element(By.ID, "produce-value").get_attribute("value") == "kept"
    after = browser.broker.fetch(TOPIC, 0, offset)["high_watermark"]
    assert after == offset + 1  # nothing was written by the refused form
    # The refused form's page came with status 400, which the browser logs: expected here.
    logged = severe_entries(browser.driver)
    assert all("/messages/produce" in e["message"] and "400" in e["message"] for e in logged)


def test_the_console_knows_the_cluster_runs_without_auth(stack: ConsoleStack) -> None:
    """Issue 27 S6: with auth off there is no "Sign in", the login page does not claim a key
    is required, and the Security page says ACLs take effect only with auth on."""
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        home = http.get("/topics").text
        assert 'id="auth-off"' in home and "auth off: no key needed" in home
        assert '<a href="/login">Sign in</a>' not in home
        login = http.get("/login").text
        assert "runs with auth off" in login and "requires an API key" not in login
        security = http.get("/security").text
        assert "Auth is off on this cluster: every request is allowed" in security
        assert "only super users may do anything" not in security
