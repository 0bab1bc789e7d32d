"""What a request names: subjects, versions, schema ids and flags, checked as Confluent
checks them (42208 invalid subject, 42202 invalid version)."""

from __future__ import annotations

import unicodedata

from registry.errors import (
    INVALID_SUBJECT,
    INVALID_VERSION,
    RegistryError,
    schema_not_found,
    unprocessable,
)

MAX_SUBJECT = 255  # a topic name (249) and "-value"; longer names are refused, not stored
INT_MAX = 2**31 - 1
LATEST = -1


def subject_name(raw: str) -> str:
    """A subject name: 1..255 characters, none of them a control character."""
    if not raw or len(raw) > MAX_SUBJECT:
        why = (
            "is empty" if not raw else f"is {len(raw)} characters long (the limit is {MAX_SUBJECT})"
        )
        raise unprocessable(INVALID_SUBJECT, f"The specified subject {why}.")
    if any(unicodedata.category(c) == "Cc" for c in raw):
        raise unprocessable(
            INVALID_SUBJECT, f"The specified subject {raw!r} contains a control character."
        )
    return raw


def version_number(raw: str) -> int:
    """A version: 1..2^31-1, or "latest" / -1 (LATEST)."""
    if raw == "latest":
        return LATEST
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value == LATEST or 1 <= value <= INT_MAX:
        return value
    raise RegistryError(
        422,
        INVALID_VERSION,
        f"The specified version '{raw}' is not a valid version id. Allowed values are between "
        f'[1, {INT_MAX}] and the string "latest"',
    )


def schema_id(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise schema_not_found(raw) from None
    if not 1 <= value <= INT_MAX:
        raise schema_not_found(raw)
    return value


def flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"
