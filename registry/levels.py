"""Compatibility levels and modes, as Confluent names them, and how a level becomes the
(reader, writer) pairs the schema type answers for (schemaformat/base.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = "BACKWARD"
MODES = ("READWRITE", "READONLY", "IMPORT")
DEFAULT_MODE = "READWRITE"

S = TypeVar("S")


def pairs(level: str, new: S, previous: Sequence[S]) -> list[tuple[S, S]]:
    """(reader, writer) pairs to check `new` against `previous` (oldest first, live only):
    BACKWARD: the new schema reads the old data; FORWARD: the old schema reads the new data;
    FULL: both. Non-transitive levels compare with the latest version only."""
    if level == "NONE" or not previous:
        return []
    olds = list(previous) if level.endswith("_TRANSITIVE") else [previous[-1]]
    base = level.removesuffix("_TRANSITIVE")
    out: list[tuple[S, S]] = []
    for old in reversed(olds):  # newest first: the likeliest conflict is reported first
        if base in ("BACKWARD", "FULL"):
            out.append((new, old))
        if base in ("FORWARD", "FULL"):
            out.append((old, new))
    return out
