"""docs/kafka-apis.md is the table SUPPORTED generates."""

from __future__ import annotations

from pathlib import Path

from ingest.kafka.api_table import render

DOC = Path(__file__).resolve().parents[4] / "docs" / "kafka-apis.md"


def test_the_api_table_matches_supported() -> None:
    assert DOC.read_text() == render(), (
        "docs/kafka-apis.md is stale: run "
        "`.venv/bin/python -m ingest.kafka.api_table > docs/kafka-apis.md`"
    )
