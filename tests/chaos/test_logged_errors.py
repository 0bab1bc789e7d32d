"""The failed run's report names what each node logged as a bug (tests/chaos/logged_errors.py)."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.chaos.logged_errors import PER_NODE, logged_errors


def _line(level: str, msg: str, exc: str | None = None) -> str:
    doc = {"ts": "2026-11-29T14:29:46.435Z", "level": level, "role": "fetch", "msg": msg}
    return orjson.dumps({**doc, **({"exc": exc} if exc else {})}).decode()


def test_errors_are_counted_with_the_exceptions_last_line(tmp_path: Path) -> None:
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1\nTypeError: bad operand'
    log = tmp_path / "fetch.log"
    lines = [
        "uvicorn says hello",  # not JSON: skipped
        _line("warning", "reading the cold manifest failed"),  # an outage: not a bug
        _line("error", "request failed", trace),
        _line("error", "request failed", trace),
        _line("error", "checkpoint failed"),
        *(_line("error", f"other {i}") for i in range(PER_NODE)),
    ]
    log.write_text("\n".join(lines) + "\n")
    report = logged_errors({"fetch node": log, "broker 1": tmp_path / "absent.log"})
    assert report.splitlines()[:3] == [
        "--- ERROR lines, by node (most frequent first):",
        "fetch node:",
        "  2 x request failed: TypeError: bad operand",
    ]
    assert "  ... and 2 more" in report
    assert "reading the cold manifest" not in report and "broker 1" not in report


def test_a_clean_run_says_so(tmp_path: Path) -> None:
    log = tmp_path / "broker-1.log"
    log.write_text(_line("info", "partition role") + "\n")
    assert logged_errors({"broker 1": log}) == "--- no node logged an ERROR line"
