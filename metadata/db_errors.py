"""The SQLAlchemy adapter's half that meets errors: what Postgres or the driver raise becomes
a failures/ family here, once, as it leaves the engine (SQLAlchemy's `handle_error` hook, so
every repository on an engine made by metadata.db.make_engine is covered), rather than being
caught and sorted far away:

- the server away, a connection lost or refused, a statement or lock timeout:
  `PostgresUnavailable` (UNAVAILABLE, retriable: try again once it is back);
- a constraint the change breaks (unique, foreign key, check, not null):
  `ConstraintViolation` (INVALID_REQUEST: the same change fails again), carrying the
  SQLSTATE and the constraint's name so a repository can say what the request got wrong;
- anything else (a syntax error, a missing column) stays SQLAlchemy's: a bug.

The driver's exception (psycopg's) is the new one's `__cause__`. Connection invalidation
is unchanged (SQLAlchemy invalidates before the replacement is raised); a pre-ping is left
alone (the pool handles a dead pooled connection itself).
"""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy import exc as sa
from sqlalchemy.engine import Engine, ExceptionContext

from failures.families import InvalidRequestError, UnavailableError

POSTGRES = "Postgres"


class PostgresUnavailable(UnavailableError):
    def __init__(self, message: str) -> None:
        super().__init__(POSTGRES, message)


class ConstraintViolation(InvalidRequestError):
    """`sqlstate`: 23505 unique, 23503 foreign key, 23514 check, 23502 not null."""

    def __init__(self, message: str, sqlstate: str | None, constraint: str | None) -> None:
        super().__init__(message, sqlstate=sqlstate, constraint=constraint)
        self.sqlstate, self.constraint = sqlstate, constraint


UNIQUE_VIOLATION = "23505"
FOREIGN_KEY_VIOLATION = "23503"


def _first_line(exc: BaseException | None) -> str:
    text = str(exc).strip() if exc is not None else ""
    return text.splitlines()[0] if text else type(exc).__name__


def translate(error: sa.SQLAlchemyError | None) -> Exception | None:
    """The family error `error` becomes, or None to leave it as it is."""
    if not isinstance(error, sa.DBAPIError):
        return None
    orig = error.orig
    if error.connection_invalidated or isinstance(error, sa.OperationalError | sa.InterfaceError):
        return PostgresUnavailable(_first_line(orig))
    if isinstance(error, sa.IntegrityError):
        diag = getattr(orig, "diag", None)
        return ConstraintViolation(
            _first_line(orig),
            getattr(orig, "sqlstate", None),
            getattr(diag, "constraint_name", None),
        )
    return None


def _on_error(context: ExceptionContext) -> Exception | None:
    if context.is_pre_ping:
        return None
    return translate(context.sqlalchemy_exception)


def install(engine: Engine) -> None:
    """Translate `engine`'s errors from now on (make_engine does this for every engine)."""
    event.listen(engine, "handle_error", _on_error)


# What a caller catches when Postgres may be away: the adapter's error, and the pool's own
# wait for a free connection running out (raised before any statement, so no hook sees it).
POSTGRES_DOWN: tuple[type[Exception], ...] = (PostgresUnavailable, sa.TimeoutError)
