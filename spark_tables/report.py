"""Diagnostics: the reader's plan and per-task reads as JSON lines in `reportDir`.

Planning and reading run in Spark's Python workers, not in the process that asked for the
query, so what they did is told through a file: one line per plan and per input partition
read ("kind": "plan" | "read" | "hot"). Lines are appended with one O_APPEND write each,
so concurrent tasks on one machine never interleave them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FILE_NAME = "tierlog-scan.jsonl"


def write(report_dir: str | None, entry: dict[str, Any]) -> None:
    if not report_dir:
        return
    os.makedirs(report_dir, exist_ok=True)
    line = (json.dumps(entry, separators=(",", ":"), default=str) + "\n").encode()
    fd = os.open(os.path.join(report_dir, FILE_NAME), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read(report_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every entry written so far, oldest first."""
    path = Path(report_dir) / FILE_NAME
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def clear(report_dir: str | os.PathLike[str]) -> None:
    (Path(report_dir) / FILE_NAME).unlink(missing_ok=True)
