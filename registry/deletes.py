"""Deleting versions and subjects, Confluent's way: a soft delete first (the version stays
readable with `deleted=true` and keeps its id), then `permanent=true` removes it. A version
another live schema references cannot go (42206)."""

from __future__ import annotations

from registry.errors import (
    REFERENCE_EXISTS,
    SUBJECT_NOT_SOFT_DELETED,
    SUBJECT_SOFT_DELETED,
    VERSION_NOT_SOFT_DELETED,
    VERSION_SOFT_DELETED,
    not_found,
    not_permitted,
    unprocessable,
)
from registry.params import LATEST
from registry.service import Registry


def _writable(registry: Registry, subject: str) -> None:
    if registry.settings.mode(subject) == "READONLY":
        raise not_permitted(f"Subject {subject} is in read-only mode")


def _unreferenced(registry: Registry, subject: str, numbers: list[int]) -> None:
    for number in numbers:
        users = registry.store.referenced_by(subject, number)
        if users:
            raise unprocessable(
                REFERENCE_EXISTS,
                f"One or more references exist to the schema {{subject={subject}, "
                f"version={number}}}: schema ids {users}",
            )


def delete_version(registry: Registry, subject: str, number: int, permanent: bool) -> int:
    _writable(registry, subject)
    version = registry.version(subject, number, deleted=number != LATEST)
    if not permanent and version.deleted:
        raise not_found(
            VERSION_SOFT_DELETED,
            f"Subject '{subject}' Version {version.version} was soft deleted. "
            "Set permanent=true to delete permanently",
        )
    if permanent and not version.deleted:
        raise not_found(
            VERSION_NOT_SOFT_DELETED,
            f"Subject '{subject}' Version {version.version} was not deleted first before "
            "being permanently deleted",
        )
    _unreferenced(registry, subject, [version.version])
    if permanent:
        registry.store.hard_delete(subject, [version.version])
    else:
        registry.store.soft_delete(subject, [version.version])
    return version.version


def delete_subject(registry: Registry, subject: str, permanent: bool) -> list[int]:
    _writable(registry, subject)
    every = registry.versions(subject, deleted=True)
    live = [v.version for v in every if not v.deleted]
    if not permanent:
        if not live:
            raise not_found(
                SUBJECT_SOFT_DELETED,
                f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently",
            )
        _unreferenced(registry, subject, live)
        registry.store.soft_delete(subject, live)
        return live
    if live:
        raise not_found(
            SUBJECT_NOT_SOFT_DELETED,
            f"Subject '{subject}' was not deleted first before being permanently deleted",
        )
    numbers = [v.version for v in every]
    _unreferenced(registry, subject, numbers)
    registry.store.hard_delete(subject, numbers)
    for name in ("compatibility", "mode"):
        registry.store.set_setting(subject, name, None)
    return numbers
