"""How a failure is logged where it is caught and survived: an outage (a retriable family:
Postgres or S3 away, a full disk, a peer gone) is one warning line that names it, since
the operator needs the fact and not the stack, and a chaos run or a long Postgres outage
would otherwise fill the log with identical tracebacks; anything else is a bug, logged as
an error with its traceback (what cluster/duty.py's FailurePolicy does for duties)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from failures.classify import family, is_retriable


def log_failure(
    logger: logging.Logger,
    msg: str,
    exc: BaseException,
    extra: Mapping[str, object] | None = None,
) -> None:
    context = dict(extra or {})
    if is_retriable(exc):
        context.update(family=family(exc).value, error=f"{type(exc).__name__}: {exc}")
        logger.warning(msg, extra=context)
    else:
        logger.error(msg, exc_info=exc, extra=context)
