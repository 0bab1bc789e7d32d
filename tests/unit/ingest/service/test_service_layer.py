"""The service layer's shape (issue 25): the protocol front-ends are codecs over
ingest/service, holding no Broker, and ingest/kafka is typed. import-linter holds their
imports (pyproject.toml); these hold what imports cannot show."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
FRONT_ENDS = [
    *sorted((ROOT / "ingest/api").glob("*.py")),
    *sorted((ROOT / "ingest/kafka").glob("*.py")),
]
BROKER_REACH = re.compile(r"\b(?:ctx|services|self)\.broker\b|\bapp\.state\.broker\b")
LOG_REACH = re.compile(r"\.log\.|\.unified\.")  # a partition's LocalLog / UnifiedLog
MAX_ANY = 10  # issue 25: lines naming Any in ingest/kafka (`grep -c Any`) at most 10


def test_front_ends_reach_the_broker_only_through_services() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in FRONT_ENDS
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BROKER_REACH.search(line)
    ]
    assert not found, "front-ends call ingest/service, not the Broker:\n" + "\n".join(found)


def test_kafka_front_end_is_typed() -> None:
    uses = {
        str(path.relative_to(ROOT)): sum(
            1 for line in path.read_text().splitlines() if re.search(r"\bAny\b", line)
        )
        for path in sorted((ROOT / "ingest/kafka").glob("*.py"))
    }
    total = sum(uses.values())
    assert total <= MAX_ANY, f"{total} uses of Any in ingest/kafka: {uses}"


def test_front_ends_do_not_read_the_log_underneath() -> None:
    """The hot log's bounds and epochs come through ingest/service/partitions.py."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in FRONT_ENDS
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if LOG_REACH.search(line)
    ]
    assert not found, "front-ends read partitions through services:\n" + "\n".join(found)
