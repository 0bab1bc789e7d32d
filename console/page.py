"""What a console page declares: its nav entry and its routes (console/pages/*.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from console.history import Sampler, Source


@dataclass(frozen=True)
class Page:
    name: str  # the nav's key, and the `active` marker of its templates
    title: str  # the nav label
    path: str  # where the nav links
    routes: Sequence[BaseRoute]
    # History sources the sampler runs for this page (e.g. group lag), made from the sampler.
    sources: Sequence[Callable[[Sampler], Source]] = ()
