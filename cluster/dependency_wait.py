"""Start-up against dependencies that may be briefly away: a node that starts while Postgres
is frozen or restarting, or while S3 answers errors, waits for them (a bounded time, with
backoff, logging each miss) instead of dying on its first connection attempt. Kafka's
brokers do the same for their controller quorum."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from cluster.node_settings import STARTUP_WAIT_S

T = TypeVar("T")

log = logging.getLogger("tierlog.startup")

# How long a starting node waits for Postgres or S3 before it gives up (and exits non-zero):
# --startup-wait-s / TIERLOG_STARTUP_WAIT_S (cluster/node_settings.py), set at start-up.
DEFAULT_STARTUP_WAIT_S: float = STARTUP_WAIT_S.default
_wait_s = [DEFAULT_STARTUP_WAIT_S]
_FIRST_BACKOFF_S, _MAX_BACKOFF_S = 0.5, 5.0


class DependencyUnavailableError(RuntimeError):
    """A dependency stayed unreachable for the whole start-up wait."""


def set_startup_wait_s(seconds: float) -> None:
    """This process's start-up wait (the composition root sets it from the role's settings)."""
    if seconds < 0:
        raise ValueError(f"a start-up wait must be zero or more seconds, not {seconds}")
    _wait_s[0] = seconds


def startup_wait_s() -> float:
    return _wait_s[0]


def wait_for(
    what: str,
    attempt: Callable[[], T],
    *,
    retry_on: tuple[type[BaseException], ...],
    timeout_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`attempt()`'s result, calling it again while it raises one of `retry_on`, until
    `timeout_s` (default: the role's --startup-wait-s, else 60 s) have passed."""
    budget = startup_wait_s() if timeout_s is None else timeout_s
    deadline = time.monotonic() + budget
    backoff, misses = _FIRST_BACKOFF_S, 0
    while True:
        try:
            result = attempt()
        except retry_on as exc:
            misses += 1
            left = deadline - time.monotonic()
            if left <= 0:
                raise DependencyUnavailableError(
                    f"{what} still unreachable after {budget:g}s ({misses} attempts): "
                    f"{type(exc).__name__}: {_first_line(exc)}"
                ) from exc
            log.warning(
                f"{what} unreachable, retrying",
                extra={
                    "attempt": misses,
                    "retry_in_s": round(min(backoff, left), 2),
                    "error": f"{type(exc).__name__}: {_first_line(exc)}",
                },
            )
            sleep(min(backoff, left))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
            continue
        if misses:
            log.info(f"{what} reachable", extra={"attempts": misses + 1})
        return result


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
