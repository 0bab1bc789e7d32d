"""failures/logged.py: a survived outage is one warning line naming it, a bug an error with
its traceback (a chaos run's logs had 190 identical tracebacks of "Postgres is away")."""

from __future__ import annotations

import errno
import logging

import pytest

from failures.logged import log_failure
from metadata.db_errors import PostgresUnavailable

log = logging.getLogger("tierlog.test.logged")


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # a real traceback, as at the call sites
        return caught


@pytest.mark.parametrize(
    ("exc", "family"),
    [
        (PostgresUnavailable("connection failed"), "unavailable dependency"),
        (OSError(errno.ENOSPC, "No space left on device"), "storage"),
        (ConnectionResetError(errno.ECONNRESET, "reset by peer"), "unavailable dependency"),
    ],
)
def test_an_outage_is_one_warning_line_naming_it(
    caplog: pytest.LogCaptureFixture, exc: BaseException, family: str
) -> None:
    with caplog.at_level(logging.DEBUG, logger=log.name):
        log_failure(log, "reading the cold manifest failed", _raised(exc), {"topic": "orders"})
    [record] = caplog.records
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert record.getMessage() == "reading the cold manifest failed"
    assert record.__dict__["family"] == family
    assert record.__dict__["error"] == f"{type(exc).__name__}: {exc}"
    assert record.__dict__["topic"] == "orders"


def test_a_bug_is_an_error_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    exc = _raised(TypeError("int() argument must be a string, not 'NoneType'"))
    with caplog.at_level(logging.DEBUG, logger=log.name):
        log_failure(log, "group expiry sweep failed", exc)
    [record] = caplog.records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and record.exc_info[1] is exc
    assert "family" not in record.__dict__
