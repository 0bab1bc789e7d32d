"""Progress of long client commands (`tierlog produce`, `tierlog replay`): a rich progress
display on stderr when it is a terminal, and the tally for the summary they print when done
or interrupted (Ctrl-C, SIGTERM)."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class Tally:
    """Records and bytes done so far, and since when."""

    def __init__(self) -> None:
        self.records = 0
        self.nbytes = 0
        self.started = time.monotonic()

    def add(self, records: int, nbytes: int) -> None:
        self.records += records
        self.nbytes += nbytes

    def seconds(self) -> float:
        return time.monotonic() - self.started

    def rate(self) -> float:
        return self.records / max(self.seconds(), 1e-9)

    def summary(self) -> str:
        """`N records (X MB) in Ts: R records/s, M MB/s`."""
        seconds = max(self.seconds(), 1e-9)
        return (
            f"{self.records:,} records ({self.nbytes / 1e6:,.1f} MB) in {seconds:.2f}s: "
            f"{self.records / seconds:,.0f} records/s, {self.nbytes / 1e6 / seconds:,.1f} MB/s"
        )


def progress(console: Console, total: int | None, quiet: bool = False) -> Progress:
    """A progress display with a `rate` field: a bar toward `total`, or a running count when
    the total is unknown (stdin). Off when asked, or when stderr is not a terminal."""
    columns: tuple[ProgressColumn, ...]
    if total is None:
        columns = (
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            TextColumn("{task.completed:,} records"),
            TextColumn("{task.fields[rate]:>12} rec/s"),
            TimeElapsedColumn(),
        )
    else:
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:>12} rec/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
    return Progress(*columns, console=console, disable=quiet or not console.is_terminal)
