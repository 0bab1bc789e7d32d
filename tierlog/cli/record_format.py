"""`tierlog consume --format`: kcat's output format strings.

%t topic, %p partition, %o offset, %T timestamp (ms since the epoch), %k key, %K key length,
%s value, %S value length, %h headers (NAME=VALUE,…), %% a percent sign; \\n, \\t, \\r and
\\\\ are escapes. A null key or value prints as `null`, its length as -1 (as kcat does).
"""

from __future__ import annotations

from collections.abc import Callable

from tierlog.client import ConsumerRecord

Piece = Callable[[ConsumerRecord], bytes]

_NULL = b"null"


def _bytes_or_null(b: bytes | None) -> bytes:
    return _NULL if b is None else b


def _length(b: bytes | None) -> bytes:
    return b"-1" if b is None else str(len(b)).encode()


def _headers(r: ConsumerRecord) -> bytes:
    return b",".join(name.encode() + b"=" + _bytes_or_null(value) for name, value in r.headers)


_TOKENS: dict[str, Piece] = {
    "t": lambda r: r.topic.encode(),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "T": lambda r: str(r.timestamp).encode(),
    "k": lambda r: _bytes_or_null(r.key),
    "K": lambda r: _length(r.key),
    "s": lambda r: _bytes_or_null(r.value),
    "S": lambda r: _length(r.value),
    "h": _headers,
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}


def _literal(text: str) -> Piece:
    data = text.encode()
    return lambda _r: data


def compile_format(fmt: str) -> Callable[[ConsumerRecord], bytes]:
    """The record printer of `fmt`; ValueError naming an unknown token or escape."""
    pieces: list[Piece] = []
    text = ""
    i = 0
    while i < len(fmt):
        c = fmt[i]
        nxt = fmt[i + 1] if i + 1 < len(fmt) else ""
        if c == "%" and nxt == "%":
            text += "%"
        elif c == "%":
            if nxt not in _TOKENS:
                raise ValueError(f"unknown token %{nxt} (known: %t %p %o %T %k %K %s %S %h %%)")
            if text:
                pieces.append(_literal(text))
                text = ""
            pieces.append(_TOKENS[nxt])
        elif c == "\\":
            if nxt not in _ESCAPES:
                raise ValueError(f"unknown escape \\{nxt} (known: \\n \\t \\r \\\\)")
            text += _ESCAPES[nxt]
        else:
            text += c
            i += 1
            continue
        i += 2
    if text:
        pieces.append(_literal(text))
    return lambda r: b"".join(p(r) for p in pieces)
