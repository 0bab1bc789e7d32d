"""docs/settings.md, generated from every role's settings table:
`python -m tierlog.cli.settings_page > docs/settings.md` (a unit test keeps it current)."""

from __future__ import annotations

from cluster.settings_table import SettingsTable, reference
from compaction.settings import COMPACTION
from console.settings import CONSOLE
from fetch.settings import FETCH
from ingest.settings import BROKER
from tiering.settings import TIERING
from tierlog.devstack.settings import DEV

TABLES: tuple[SettingsTable, ...] = (BROKER, FETCH, TIERING, COMPACTION, CONSOLE, DEV)


def page() -> str:
    return reference(TABLES)


if __name__ == "__main__":
    print(page(), end="")
