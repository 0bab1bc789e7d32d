"""The ERROR lines of every node's log, summed up for a failed run's report. Outages are
WARNING lines (failures/logged.py), so what is here is what a node took for a bug: the
first place to look when a client saw a 500. Put before the log tails, since a long report
is cut in the middle by CI's output."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson

PER_NODE = 5  # distinct errors shown per node


def _summary(line: str) -> str | None:
    """`msg: the exception's last line` of an ERROR line of the JSON log, else None."""
    if not line.startswith("{"):
        return None
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or doc.get("level") not in ("error", "critical"):
        return None
    exc = str(doc.get("exc") or "").strip().splitlines()
    return f"{doc.get('msg')}" + (f": {exc[-1][:300]}" if exc else "")


def logged_errors(paths: dict[str, Path]) -> str:
    parts = []
    for name, path in paths.items():
        text = path.read_text(errors="replace") if path.exists() else ""
        seen = Counter(s for s in map(_summary, text.splitlines()) if s is not None)
        if seen:
            shown = [f"  {n} x {s}" for s, n in seen.most_common(PER_NODE)]
            if len(seen) > PER_NODE:
                shown.append(f"  ... and {len(seen) - PER_NODE} more")
            parts.append(f"{name}:\n" + "\n".join(shown))
    if not parts:
        return "--- no node logged an ERROR line"
    return "--- ERROR lines, by node (most frequent first):\n" + "\n".join(parts)
