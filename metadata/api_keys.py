"""API key format and hashing (stdlib only: hashlib.scrypt).

A key reads ``tlk_<id>_<secret>``: ``id`` (12 hex chars) is stored in clear and indexed, so a
lookup is one primary-key probe; ``secret`` (43 url-safe chars, 256 random bits) is stored
only as a salted scrypt hash, so a leaked metadata database does not leak usable keys.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import NamedTuple

PREFIX = "tlk"
ID_HEX = 12
MIN_SECRET = 32
# scrypt cost: ~50-100 ms and 16 MiB per hash. Keys are random (not passwords), so this is
# defence in depth; servers cache verified keys so the produce path never pays it.
_N, _R, _P = 2**14, 8, 1


class ParsedKey(NamedTuple):
    key_id: str
    secret: str


def new_key() -> tuple[str, ParsedKey]:
    key_id = secrets.token_hex(ID_HEX // 2)
    secret = secrets.token_urlsafe(32)
    return f"{PREFIX}_{key_id}_{secret}", ParsedKey(key_id, secret)


def parse_key(token: str) -> ParsedKey | None:
    """The key's parts, or None when it is not shaped like a tierlog key."""
    prefix, sep, rest = token.partition("_")
    key_id, sep2, secret = rest.partition("_")
    if prefix != PREFIX or not sep or not sep2 or len(key_id) != ID_HEX:
        return None
    if any(c not in "0123456789abcdef" for c in key_id) or len(secret) < MIN_SECRET:
        return None
    return ParsedKey(key_id, secret)


def hash_secret(secret: str, salt: bytes | None = None) -> tuple[bytes, bytes]:
    """(salt, hash) of a key's secret."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=_N, r=_R, p=_P, dklen=32)
    return salt, digest


def verify_secret(secret: str, salt: bytes, expected: bytes) -> bool:
    return hmac.compare_digest(hash_secret(secret, salt)[1], expected)
