"""What a console page declares: its nav entry and its routes (console/pages/*.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from starlette.routing import BaseRoute


@dataclass(frozen=True)
class Page:
    name: str  # the nav's key, and the `active` marker of its templates
    title: str  # the nav label
    path: str  # where the nav links
    routes: Sequence[BaseRoute]
