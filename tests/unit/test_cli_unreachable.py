"""A client command pointed at a port where nothing listens (issue 27 S4) says the connection
was refused, where its URL came from, and how to reach a running `tierlog dev` (dev.env),
rather than REQUEST_TIMED_OUT or UNKNOWN_SERVER_ERROR."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*args: str, env_url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TIERLOG_URL"}
    if env_url is not None:
        env["TIERLOG_URL"] = env_url
    return subprocess.run(
        [sys.executable, "-m", "tierlog", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        input="",
    )


@pytest.mark.parametrize(
    "command", [["topics", "list"], ["consume", "t", "-e"], ["groups", "list"]]
)
def test_a_refused_connection_is_named_as_such(command: list[str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    out = _run(*command, "--url", url)
    assert out.returncode == 1
    assert out.stderr.startswith(
        f"tierlog: NETWORK_EXCEPTION: connection refused by {url}: no tierlog node listens "
        "there (the URL is --url's)."
    ), out.stderr
    assert ". .tierlog/dev.env" in out.stderr and "TIMED_OUT" not in out.stderr


def test_the_message_says_the_url_came_from_tierlog_url() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    out = _run("topics", "list", env_url=url)
    assert (
        f"connection refused by {url}: no tierlog node listens there (the URL is "
        "TIERLOG_URL's)" in out.stderr
    ), out.stderr
