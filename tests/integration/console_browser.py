"""The console's browser-test harness: a module-scoped cluster (one broker) with a
`tierlog console` process in front of it, and headless Debian Chromium driven by Selenium
through /usr/bin/chromedriver (given explicitly: Selenium Manager never downloads): its old
headless shell (package chromium-headless-shell) where installed, else the full browser.

Fixtures (import console_fixture and browser_fixture into a test file, `# noqa: F401`):
- `console`: a ConsoleStack (broker, console URL, the module's WebDriver, `visit` that
  saves a screenshot under tests/output/console/ for every page it opens);
- `browser`: the same, and after every test any SEVERE entry of the browser's log (a
  console error, a failed load, a CSP violation) fails that test;
- `secure_console` / `secure_browser` (secure_console_fixture, secure_browser_fixture):
  the same with auth on; `sign_in(user)` signs the browser in through the login page, and
  `api` sends the admin's key.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from http_transport.trust import default_trust
from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port
from tests.integration.secured import ADMIN, Secured, secure_broker
from tests.integration.zygote import ForkedProcess, start_tierlog
from tierlog.devstack.parent_watch import child_env

CHROMIUM = "/usr/bin/chromium"
# The same Blink and V8 without the full browser's UI layers: the browser-test files took 62.2,
# 64.4 -> 49.1, 42.6 machine CPU-s with it, their 34 tests passing either way. The binary, not
# /usr/bin's wrapper, which runs it without exec (chromedriver's quit left it running). It hangs
# under chromedriver when given a --user-data-dir: it runs on the profile chromedriver makes.
HEADLESS_SHELL = "/usr/lib/chromium/chromium-headless-shell"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).resolve().parents[1] / "output" / "console"
WAIT_S = 15


class ConsoleProcess:
    """`python -m tierlog console` as a child process, its log beside the broker's."""

    def __init__(self, broker_url: str, log_path: Path, sampler_key: str | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [
            "console",
            "--broker", broker_url,
            "--listen", f"127.0.0.1:{self.port}",
            "--sample-interval", "1",
        ]  # fmt: skip
        # The sampler's key goes by the environment, not argv (which `ps` shows).
        self.env = {"TIERLOG_API_KEY": sampler_key} if sampler_key else {}
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | ForkedProcess | None = None

    def start(self, timeout: float = 30) -> ConsoleProcess:
        self.proc = start_tierlog(self.argv, child_env({**os.environ, **self.env}), self.log_path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"console exited: {self.log_path.read_text()[-3000:]}")
            try:
                if (
                    httpx.get(
                        f"{self.url}/static/console.css", timeout=1, verify=default_trust()
                    ).status_code
                    == 200
                ):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"console not serving within {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class ConsoleStack:
    """The broker, the console in front of it, the browser, and `api`: an httpx client of
    the broker for a test's own set-up (with the admin's key when auth is on)."""

    def __init__(
        self,
        broker: BrokerProcess,
        console: ConsoleProcess,
        driver: WebDriver,
        secured: Secured | None = None,
    ):
        self.broker = broker
        self.console = console
        self.url = console.url
        self.driver = driver
        self.secured = secured
        self.api = secured.client(broker.url, ADMIN) if secured else broker.http

    def sign_in(self, user: str = ADMIN) -> None:
        """Signs the browser in with `user`'s key through the login page (auth on only)."""
        assert self.secured is not None, "sign_in needs the secure_console fixture"
        self.visit("/login", "login")
        box = self.find("#login-form input[name=api_key]")
        box.send_keys(self.secured.key(user))
        self.find("#login-form button[type=submit]").click()
        self.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "form[action='/logout']"))

    def visit(self, path: str, shot: str | None = None) -> WebDriver:
        """Opens a console page and saves its screenshot (named after the path unless
        `shot` is given) once the document has loaded."""
        self.driver.get(f"{self.url}{path}")
        self.wait(lambda d: d.execute_script("return document.readyState") == "complete")
        self.screenshot(shot or path)
        return self.driver

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name.strip("/")) or "overview"
        target = SCREENSHOTS / f"{slug}.png"
        self.driver.save_screenshot(str(target))
        return target

    def wait(self, condition: Callable[[WebDriver], Any], timeout: float = WAIT_S) -> Any:
        # htmx swaps replace elements under a condition's feet: a stale or not-yet-swapped-in
        # element is "not yet", not a failure.
        ignored = (NoSuchElementException, StaleElementReferenceException)
        return WebDriverWait(self.driver, timeout, ignored_exceptions=ignored).until(condition)

    def find(self, css: str) -> WebElement:
        return self.wait(lambda d: d.find_element(By.CSS_SELECTOR, css))

    def text(self, css: str) -> str:
        # Found and read in one step, retried if an htmx swap replaced it in between (a
        # tuple: an empty text is an answer, not a reason to keep waiting).
        found = self.wait(lambda d: (d.find_element(By.CSS_SELECTOR, css).text,))
        return str(found[0])


def _chromium() -> WebDriver:
    binary = HEADLESS_SHELL if shutil.which(HEADLESS_SHELL) else CHROMIUM
    if not (shutil.which(binary) and shutil.which(CHROMEDRIVER)):
        pytest.skip("no chromium / chromedriver: scripts/test installs Debian's (root only)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1400,1000",
    ):  # fmt: skip
        options.add_argument(flag)
    profile = None  # the headless shell's is chromedriver's, which removes it at quit
    if binary == CHROMIUM:
        profile = tempfile.mkdtemp(prefix="tierlog-console-chromium-")
        options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=CHROMEDRIVER, port=free_port())
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    driver.tierlog_profile = profile  # type: ignore[attr-defined]
    return driver


def severe_entries(driver: WebDriver) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


@contextlib.contextmanager
def _stack(database_url: str, root: Path, secure: bool) -> Iterator[ConsoleStack]:
    secured = Secured(database_url) if secure else None
    if secured is not None:
        broker = secure_broker(database_url, root / "data-1")
    else:
        broker = BrokerProcess(database_url, root / "data-1", 1)
    app: ConsoleProcess | None = None
    driver: WebDriver | None = None
    try:
        broker.start()
        sampler_key = secured.key(ADMIN) if secured is not None else None
        app = ConsoleProcess(broker.url, root / "console.log", sampler_key).start()
        driver = _chromium()
        yield ConsoleStack(broker, app, driver, secured)
    finally:
        if driver is not None:
            driver.quit()
            if driver.tierlog_profile is not None:  # type: ignore[attr-defined]
                shutil.rmtree(driver.tierlog_profile, ignore_errors=True)  # type: ignore[attr-defined]
        if app is not None:
            app.stop()
        broker.stop()
        if secured is not None:
            secured.close()


@pytest.fixture(scope="module", name="console")
def console_fixture(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleStack]:
    """An --insecure broker: no keys, no sign-in."""
    with _stack(db_factory(), tmp_path_factory.mktemp("console"), secure=False) as stack:
        yield stack


@pytest.fixture(scope="module", name="secure_console")
def secure_console_fixture(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleStack]:
    """A broker with auth on (super user User:admin); the browser signs in with sign_in()."""
    with _stack(db_factory(), tmp_path_factory.mktemp("console"), secure=True) as stack:
        yield stack


def _checked(stack: ConsoleStack) -> Iterator[ConsoleStack]:
    severe_entries(stack.driver)  # drop what an earlier test left
    yield stack
    errors = severe_entries(stack.driver)
    assert not errors, f"browser console errors: {errors}"


@pytest.fixture(name="browser")
def browser_fixture(console: ConsoleStack) -> Iterator[ConsoleStack]:
    """The module's stack, with the browser log checked after the test."""
    yield from _checked(console)


@pytest.fixture(name="secure_browser")
def secure_browser_fixture(secure_console: ConsoleStack) -> Iterator[ConsoleStack]:
    """The module's stack with auth on, with the browser log checked after the test."""
    yield from _checked(secure_console)
