"""Node settings declared once, as topic configs are in metadata/configs.py: each `Setting`
names its type, default, environment variable, command-line flag, documentation and check.

From a role's `SettingsTable` come its argparse flags, the parsing of its TIERLOG_* variables,
the resolved typed values (a flag wins over its variable, which wins over the default) and the
reference page docs/settings.md. Only the composition root (tierlog/cli, tierlog/devstack)
hands a table the environment; libraries receive the typed config objects built from it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """Settings that cannot be used; `problems` says which and why, one line each."""

    def __init__(self, role: str, problems: list[str]) -> None:
        self.role = role
        self.problems = problems
        super().__init__(f"tierlog {role}: " + "; ".join(problems))


def parse_bool(raw: str) -> bool:
    text = raw.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"expected one of {', '.join(_TRUE + _FALSE)}")


def _parser(kind: type) -> Callable[[str], Any]:
    if kind is bool:
        return parse_bool
    if kind is int:
        return lambda raw: int(raw.strip())
    if kind is float:
        return lambda raw: float(raw.strip())
    return str


def at_least(lo: float) -> Callable[[Any], str | None]:
    """A check: the value is `lo` or more."""
    return lambda value: None if value >= lo else f"must be {lo:g} or more"


def one_of(*allowed: str) -> Callable[[Any], str | None]:
    return lambda value: None if value in allowed else f"must be one of {', '.join(allowed)}"


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One setting. `name` is its field in the role's config; the flag defaults to
    --name-with-dashes and the variable to TIERLOG_NAME (give either to keep an older
    spelling; flag="" or env="" for none). `validate` returns what is wrong, or None."""

    name: str
    type: type[T]
    default: T
    doc: str
    env: str | None = None
    flag: str | None = None
    validate: Callable[[T], str | None] | None = None
    metavar: str | None = None

    @property
    def env_name(self) -> str:
        return f"TIERLOG_{self.name.upper()}" if self.env is None else self.env

    @property
    def flag_name(self) -> str:
        return "--" + self.name.replace("_", "-") if self.flag is None else self.flag

    def parse(self, raw: str) -> T:
        return cast(T, _parser(self.type)(raw))

    def check(self, value: T) -> str | None:
        if value is None or self.validate is None:
            return None
        return self.validate(value)

    def sources(self) -> str:
        """How a user sets it: "--lease-ms / TIERLOG_LEASE_MS"."""
        return " / ".join(s for s in (self.flag_name, self.env_name) if s)


@dataclass(frozen=True)
class Settings:
    """Resolved values of one role, typed by the Setting that names them."""

    role: str
    values: Mapping[str, Any]
    given: frozenset[str] = field(default_factory=frozenset)  # set by a flag or variable

    def __getitem__(self, setting: Setting[T]) -> T:
        return cast(T, self.values[setting.name])

    def fields(self, *settings: Setting[Any]) -> dict[str, Any]:
        """{name: value} of these settings: keyword arguments of a config class."""
        return {s.name: self.values[s.name] for s in settings}


class SettingsTable:
    """The settings of one role, in the order its flags and reference page list them."""

    def __init__(self, role: str, doc: str, settings: Iterable[Setting[Any]]) -> None:
        self.role = role
        self.doc = doc
        self.settings: tuple[Setting[Any], ...] = tuple(settings)
        names = [s.name for s in self.settings]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"{role}: settings declared twice: {', '.join(dupes)}")

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        """One flag per setting, left unresolved (None) so `resolve` can tell a given flag
        from the variable and the default, and report a bad variable in words."""
        for s in self.settings:
            if not s.flag_name:
                continue
            help_text = f"{s.doc} (default: {_shown(s.default)}"
            help_text += f"; {s.env_name})" if s.env_name else ")"
            help_text = help_text.replace("%", "%%")
            if s.type is bool:
                parser.add_argument(
                    s.flag_name, dest=s.name, action="store_const", const=True, help=help_text
                )
            else:
                parser.add_argument(
                    s.flag_name,
                    dest=s.name,
                    type=_flag_type(s),
                    default=None,
                    metavar=s.metavar,
                    help=help_text,
                )

    def resolve(
        self, environ: Mapping[str, str], args: argparse.Namespace | None = None
    ) -> Settings:
        """Each setting's flag, else its variable (empty counts as unset), else its default;
        every problem found is reported at once."""
        values: dict[str, Any] = {}
        given: set[str] = set()
        problems: list[str] = []
        for s in self.settings:
            value = getattr(args, s.name, None) if args is not None and s.flag_name else None
            source = s.flag_name
            if value is None and s.env_name and environ.get(s.env_name, "").strip():
                source = s.env_name
                try:
                    value = s.parse(environ[s.env_name])
                except ValueError as exc:
                    problems.append(f"{s.env_name} {_why(s, exc)}, not {environ[s.env_name]!r}")
                    continue
            if value is None:
                values[s.name] = s.default
                continue
            given.add(s.name)
            why = s.check(value)
            if why is not None:
                problems.append(f"{source} {why}, not {value!r}")
            values[s.name] = value
        if problems:
            raise SettingsError(self.role, problems)
        return Settings(self.role, values, frozenset(given))

    def defaults(self) -> Settings:
        return self.resolve({})


def _why(s: Setting[Any], exc: ValueError) -> str:
    if s.type in (int, float):
        return f"must be {'an integer' if s.type is int else 'a number'}"
    return f"must be {str(exc).removeprefix('expected ')}" if str(exc) else "is not valid"


def _flag_type(s: Setting[Any]) -> Callable[[str], Any]:
    def parse(raw: str) -> Any:
        try:
            return s.parse(raw)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{_why(s, exc)}, not {raw!r}") from None

    parse.__name__ = s.type.__name__  # argparse names the type in its messages
    return parse


def _shown(value: object) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value >= 1024 and value % 1024 == 0:
        for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
            if value % size == 0:
                return f"{value} ({value // size} {unit})"
    return str(value)


def reference(tables: Iterable[SettingsTable]) -> str:
    """docs/settings.md: every role's settings, generated from the tables."""
    lines = [
        "# Settings",
        "",
        "Every setting of every role, generated from the settings tables "
        "(`python -m tierlog.cli.settings_page > docs/settings.md`; "
        "`tests/unit/docs/test_settings_page.py` keeps this page current).",
        "",
        "A flag wins over its environment variable, which wins over the default. An empty "
        "variable counts as unset. A value that cannot be used stops the role at start-up, "
        "naming the flag or variable and why.",
    ]
    for table in tables:
        lines += ["", f"## `tierlog {table.role}`", "", table.doc, ""]
        lines += ["| Flag | Variable | Type | Default | Meaning |", "|---|---|---|---|---|"]
        for s in table.settings:
            flag = f"`{s.flag_name}`" if s.flag_name else "—"
            env = f"`{s.env_name}`" if s.env_name else "—"
            doc = s.doc.replace("|", "\\|")
            lines.append(f"| {flag} | {env} | {s.type.__name__} | {_shown(s.default)} | {doc} |")
    return "\n".join(lines) + "\n"
