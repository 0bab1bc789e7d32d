"""The console's pages, in nav order: one module per page, one line each (each module
defines PAGE, a console.page.Page)."""

from __future__ import annotations

import importlib

from console.page import Page

PAGE_MODULES = [
    "console.pages.overview",
    "console.pages.topics",
    "console.pages.messages",
    "console.pages.schemas",
    "console.pages.groups",
    "console.pages.security",
    "console.pages.lake",
]


def pages() -> list[Page]:
    found = [importlib.import_module(name).PAGE for name in PAGE_MODULES]
    return [p for p in found if isinstance(p, Page)]
