"""What a client command says when no node answers at its URL (issue 27 S4): a refused
connection is named as such, with where the URL came from and how to point the command at
a running `tierlog dev`, instead of a timeout or an "unknown server error"."""

from __future__ import annotations

from urllib.parse import urlsplit

from tierlog.client.errors import NetworkError

_HOPS = 20  # how far down a chain of causes to look


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(out) < _HOPS and cur not in out:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def refused(exc: BaseException) -> bool:
    """Did the command fail because a connection was refused (nothing listens there)?"""
    return any(isinstance(e, ConnectionRefusedError) for e in _chain(exc))


def refused_message(exc: BaseException, url: str, source: str) -> str:
    """`connection refused by …` and what to do, for the node at `url` (or the one the
    client's own error names); `source` says where the URL came from (--url, TIERLOG_URL,
    the default)."""
    named = next((e.url for e in _chain(exc) if isinstance(e, NetworkError)), None)
    parts = urlsplit(named or url)
    where = f"{parts.scheme}://{parts.netloc}" if parts.netloc else url
    return (
        f"connection refused by {where}: no tierlog node listens there (the URL is "
        f"{source}). Start one with ./scripts/dev, or use the URL of yours: dev writes it to "
        ".tierlog/dev.env as TIERLOG_URL (set -a; . .tierlog/dev.env; set +a)"
    )
