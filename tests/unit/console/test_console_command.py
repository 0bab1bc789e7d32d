"""`tierlog console`'s flags: bad ones stop it at once with a message, before it serves."""

from __future__ import annotations

import argparse

import pytest

from tierlog.cli.console_cmd import add_console


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_console(parser.add_subparsers(), "http://127.0.0.1:8080")
    args = parser.parse_args(["console", *argv])
    return int(args.func(args))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--listen", "nowhere"], "--listen wants HOST:PORT"),
        (["--broker", "127.0.0.1:8080"], "--broker wants an http(s) URL"),
        (["--sample-interval", "0"], "--sample-interval must be 0.5 to 300 seconds"),
    ],
)
def test_bad_flags_exit_2_saying_why(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(*argv) == 2
    assert message in capsys.readouterr().err
