"""docs/settings.md is what the settings tables generate (tierlog/cli/settings_page.py)."""

from __future__ import annotations

from pathlib import Path

from tierlog.cli.settings_page import TABLES, page

DOCS = Path(__file__).resolve().parents[3] / "docs"


def test_the_settings_page_is_current() -> None:
    assert (DOCS / "settings.md").read_text() == page(), (
        "docs/settings.md is stale: .venv/bin/python -m tierlog.cli.settings_page "
        "> docs/settings.md"
    )


def test_every_setting_of_every_role_is_on_the_page() -> None:
    text = (DOCS / "settings.md").read_text()
    for table in TABLES:
        assert f"## `tierlog {table.role}`" in text
        for s in table.settings:
            assert f"`{s.env_name or s.flag_name}`" in text, s.name
