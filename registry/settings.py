"""Compatibility level and mode, per subject and global: a subject's own setting, else the
global one, else the default (BACKWARD, READWRITE), as Confluent resolves them."""

from __future__ import annotations

from metadata.registry_store import GLOBAL, RegistryStore
from registry.errors import (
    SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
    SUBJECT_MODE_NOT_CONFIGURED,
    not_found,
)
from registry.levels import DEFAULT_LEVEL, DEFAULT_MODE

_DEFAULTS = {"compatibility": DEFAULT_LEVEL, "mode": DEFAULT_MODE}
_NOT_CONFIGURED = {
    "compatibility": (SUBJECT_COMPATIBILITY_NOT_CONFIGURED, "compatibility"),
    "mode": (SUBJECT_MODE_NOT_CONFIGURED, "mode"),
}


class Settings:
    def __init__(self, store: RegistryStore) -> None:
        self.store = store

    def effective(self, subject: str | None, name: str) -> str:
        if subject:
            own = self.store.setting(subject, name)
            if own is not None:
                return own
        return self.store.setting(GLOBAL, name) or _DEFAULTS[name]

    def compatibility(self, subject: str) -> str:
        return self.effective(subject, "compatibility")

    def mode(self, subject: str) -> str:
        return self.effective(subject, "mode")

    def read(self, subject: str | None, name: str, default_to_global: bool) -> str:
        """GET /config[/{subject}] and /mode[/{subject}]: a subject without its own setting
        is 40408 / 40409 unless `defaultToGlobal`."""
        if subject is None or default_to_global:
            return self.effective(subject, name)
        own = self.store.setting(subject, name)
        if own is None:
            code, what = _NOT_CONFIGURED[name]
            raise not_found(
                code, f"Subject '{subject}' does not have subject-level {what} configured"
            )
        return own

    def write(self, subject: str | None, name: str, value: str) -> None:
        self.store.set_setting(subject or GLOBAL, name, value)

    def remove(self, subject: str | None, name: str) -> str:
        """DELETE: the setting that was in force; the global one returns to the default."""
        before = self.read(subject, name, default_to_global=subject is None)
        self.store.set_setting(subject or GLOBAL, name, None)
        return before
